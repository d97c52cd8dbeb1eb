//! Derive macros for `stategraph`, re-exported by it as `stategraph::State` and
//! `stategraph::Keyed`; depend on `stategraph`, not on this crate.
//!
//! Generated code names every item by an absolute `::stategraph::...` path, so it compiles in a
//! user's crate and inside `stategraph` itself (which declares `extern crate self as stategraph`),
//! and it reaches serde through `stategraph`'s re-export so users need not depend on serde's
//! derive themselves.

extern crate proc_macro;

mod attrs;
mod keyed;
mod state;
#[cfg(test)]
mod tests;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

/// Derives `stategraph::state::State` for a struct with named fields, and writes its update
/// type.
///
/// For `struct Foo` this generates:
///
/// - `FooUpdate`, with the same visibility as `Foo`: one `Option<Write<T>>` per field, serde
///   (de)serializable with the same JSON names as `Foo` (`rename_all`, `rename` and `alias` are
///   copied); unknown fields are rejected.
/// - Builders on `FooUpdate`: `.field(value)` writes through the field's reducer and
///   `.overwrite_field(value)` replaces the value, bypassing the reducer. Both take
///   `impl Into<FieldTy>`, except for a field typed as a primitive number, which takes the
///   number itself so an untyped literal (`.turns(1)`) works. `.written_fields()` lists the
///   fields written.
/// - `impl State for Foo` (one merge per field) and `impl From<FooUpdate> for Command<Foo>`.
///
/// `Foo` itself must derive `Clone`, `Default`, `Serialize` and `Deserialize`.
///
/// Field attributes, at most one per field:
///
/// | attribute | merge of one superstep's writes |
/// | --- | --- |
/// | none, or `#[state(overwrite)]` | one writer per superstep; two are an error |
/// | `#[state(append)]` | appended (`Vec<T>`, `String`) |
/// | `#[state(add)]` | added (`+=`) |
/// | `#[state(merge_by_id)]` | records (`Vec<T>`, `T: Keyed`) replaced by key, new keys appended |
/// | `#[state(reducer = Type)]` | `Type: Reducer<FieldTy>` |
/// | `#[state(with = path::to::func)]` | `func: fn(&mut FieldTy, FieldTy)`, not exclusive |
///
/// Struct attribute: `#[state(version = 2, migrate = path::to::func)]`, both optional, sets
/// `State::VERSION` and overrides `State::migrate` with
/// `func: fn(u32, serde_json::Value) -> Result<serde_json::Value, String>`.
/// `migrate_update = path::to::func` (same signature) overrides `State::migrate_update`, which
/// carries over the updates an old thread stored after its last snapshot.
///
/// ```ignore
/// use serde::{Deserialize, Serialize};
/// use stategraph::State;
/// # fn upgrade(from: u32, old: serde_json::Value) -> Result<serde_json::Value, String> { Ok(old) }
///
/// #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
/// #[state(version = 2, migrate = upgrade)]
/// struct Chat {
///     #[state(append)]
///     messages: Vec<String>,
///     topic: String,
/// }
///
/// let update = ChatUpdate::default().messages(vec!["hi".into()]).overwrite_topic("rust");
/// assert_eq!(update.written_fields(), ["messages", "topic"]);
/// ```
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    state::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `stategraph::state::Keyed` from the one field marked `#[key]`, so a list of these
/// records can use `#[state(merge_by_id)]`.
///
/// ```ignore
/// #[derive(Keyed, Clone, Debug, Serialize, Deserialize)]
/// struct Doc {
///     #[key]
///     id: u64,
///     text: String,
/// }
/// ```
#[proc_macro_derive(Keyed, attributes(key))]
pub fn derive_keyed(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    keyed::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
