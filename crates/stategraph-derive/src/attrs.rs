//! The `#[state(...)]` attributes, and the few `#[serde(...)]` ones the update type mirrors.

use proc_macro2::Span;
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{Attribute, LitInt, Meta, Path, Token, Type};

/// What a field attribute may say, for error messages.
const FIELD_KEYS: &str =
    "`overwrite`, `append`, `add`, `merge_by_id`, `reducer = Type` or `with = path::to::func`";

/// What the struct attribute may say, for error messages.
const STRUCT_KEYS: &str =
    "`version = N`, `migrate = path::to::func` and `migrate_update = path::to::func`";

/// A reducer that ships with `stategraph::state`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Overwrite,
    Append,
    Add,
    MergeById,
}

impl Builtin {
    const ALL: [Builtin; 4] = [
        Builtin::Overwrite,
        Builtin::Append,
        Builtin::Add,
        Builtin::MergeById,
    ];

    /// The attribute key that selects it.
    pub fn key(self) -> &'static str {
        match self {
            Builtin::Overwrite => "overwrite",
            Builtin::Append => "append",
            Builtin::Add => "add",
            Builtin::MergeById => "merge_by_id",
        }
    }

    /// Its type's name in `::stategraph::state`.
    pub fn type_name(self) -> &'static str {
        match self {
            Builtin::Overwrite => "Overwrite",
            Builtin::Append => "Append",
            Builtin::Add => "Add",
            Builtin::MergeById => "MergeById",
        }
    }
}

/// How one field's writes merge.
pub enum Reducer {
    /// A library reducer; the span is its attribute key's (or the field's, for the default), so
    /// a type that does not fit the reducer is reported there.
    Builtin(Builtin, Span),
    /// `reducer = Type`: a user type implementing `Reducer<FieldTy>`.
    Type(Type),
    /// `with = path`: a plain `fn(&mut FieldTy, FieldTy)`.
    With(Path),
}

impl Reducer {
    /// The attribute key that chose it, to name it in errors.
    fn key(&self) -> &'static str {
        match self {
            Reducer::Builtin(b, _) => b.key(),
            Reducer::Type(_) => "reducer",
            Reducer::With(_) => "with",
        }
    }
}

/// The struct-level `#[state(...)]`.
#[derive(Default)]
pub struct StructAttrs {
    /// `version = N`, with the literal's span for the generated constant.
    pub version: Option<(u32, Span)>,
    /// `migrate = path`.
    pub migrate: Option<Path>,
    /// `migrate_update = path`.
    pub migrate_update: Option<Path>,
}

/// Reads the struct's `#[state(version = N, migrate = path)]`; the attribute may be repeated.
pub fn struct_attrs(attrs: &[Attribute]) -> syn::Result<StructAttrs> {
    let mut out = StructAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("version") {
                if out.version.is_some() {
                    return Err(meta.error("`version` is given twice"));
                }
                let lit: LitInt = meta.value()?.parse()?;
                out.version = Some((lit.base10_parse::<u32>()?, lit.span()));
            } else if meta.path.is_ident("migrate") {
                if out.migrate.is_some() {
                    return Err(meta.error("`migrate` is given twice"));
                }
                out.migrate = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("migrate_update") {
                if out.migrate_update.is_some() {
                    return Err(meta.error("`migrate_update` is given twice"));
                }
                out.migrate_update = Some(meta.value()?.parse()?);
            } else {
                // A reducer key here is the likely slip: say where those go.
                let hint = if is_field_key(&meta.path) {
                    "; reducers go on fields, not on the struct"
                } else {
                    ""
                };
                return Err(meta.error(format!(
                    "unknown state attribute `{}` on a struct: expected {STRUCT_KEYS}{hint}",
                    path_string(&meta.path)
                )));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Reads a field's `#[state(...)]` reducer; no attribute means overwrite.
pub fn field_reducer(field_span: Span, attrs: &[Attribute]) -> syn::Result<Reducer> {
    let mut found: Option<Reducer> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
        attr.parse_nested_meta(|meta| {
            let reducer = parse_field_key(&meta)?;
            if let Some(previous) = &found {
                return Err(meta.error(format!(
                    "two reducers on one field (`{}` and `{}`): give it one of {FIELD_KEYS}",
                    previous.key(),
                    reducer.key()
                )));
            }
            found = Some(reducer);
            Ok(())
        })?;
    }
    Ok(found.unwrap_or(Reducer::Builtin(Builtin::Overwrite, field_span)))
}

fn parse_field_key(meta: &ParseNestedMeta) -> syn::Result<Reducer> {
    if let Some(builtin) = Builtin::ALL
        .into_iter()
        .find(|b| meta.path.is_ident(b.key()))
    {
        // Without this check `append = x` fails later with a bare "expected `,`".
        if !(meta.input.is_empty() || meta.input.peek(Token![,])) {
            return Err(meta.error(format!("`{}` takes no value", builtin.key())));
        }
        return Ok(Reducer::Builtin(builtin, meta.path.span()));
    }
    if meta.path.is_ident("reducer") {
        return Ok(Reducer::Type(meta.value()?.parse()?));
    }
    if meta.path.is_ident("with") {
        return Ok(Reducer::With(meta.value()?.parse()?));
    }
    let hint = if meta.path.is_ident("version") || meta.path.is_ident("migrate") {
        "; `version` and `migrate` go on the struct"
    } else {
        ""
    };
    Err(meta.error(format!(
        "unknown state attribute `{}` on a field: expected one of {FIELD_KEYS}{hint}",
        path_string(&meta.path)
    )))
}

fn is_field_key(path: &Path) -> bool {
    Builtin::ALL.iter().any(|b| path.is_ident(b.key()))
        || path.is_ident("reducer")
        || path.is_ident("with")
}

/// The `#[serde(...)]` items among `attrs` whose key is one of `keys`, to copy onto the update
/// so its JSON names match the state's.
///
/// A serde attribute that does not parse is skipped: serde's own derive on the state struct
/// reports it, better than we could.
pub fn serde_items(attrs: &[Attribute], keys: &[&str]) -> Vec<Meta> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("serde"))
        .filter_map(|a| {
            a.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .filter(|m| keys.iter().any(|k| m.path().is_ident(k)))
        .collect()
}

/// True when every `#[serde(...)]` item in `attrs` is one of `keys` (and each parses): a
/// field or struct whose JSON is its plain serde form, field by field.
pub fn serde_only(attrs: &[Attribute], keys: &[&str]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("serde"))
        .all(|a| {
            a.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .is_ok_and(|items| {
                    items
                        .iter()
                        .all(|m| keys.iter().any(|k| m.path().is_ident(k)))
                })
        })
}

/// A path as the user wrote it, without the token printer's spaces (`a::b`, not `a :: b`).
pub fn path_string(path: &impl ToTokens) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}
