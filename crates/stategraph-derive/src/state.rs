//! `#[derive(State)]`: the update struct, its builders, and the `State`, `Update` and
//! `From<Update> for Command` impls.

use crate::attrs::{self, Builtin, Reducer};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use std::collections::HashMap;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::{Data, DeriveInput, Fields, Meta, Type};

const SHAPE_ERROR: &str =
    "derive(State) needs a struct with named fields and no generic parameters";

/// The name of the inherent method every update gets; a field of that name would shadow it.
const WRITTEN_FIELDS: &str = "written_fields";

/// One field of the state struct, as the generated code needs it.
struct StateField<'a> {
    /// As written, possibly raw (`r#type`): usable as a field or method name.
    ident: &'a Ident,
    /// Without `r#`: for names shown to people and for derived method names.
    name: String,
    ty: &'a Type,
    reducer: Reducer,
    /// `rename` / `alias` items copied from the field's `#[serde(...)]`.
    serde: Vec<Meta>,
    /// No serde attribute changes how the field reads or writes (`with`, `skip`, `flatten`...):
    /// its JSON in the state is its type's own.
    plain_serde: bool,
}

pub fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let (struct_attrs, fields) = read_input(input)?;
    let state = &input.ident;
    let update = format_ident!("{}Update", state.unraw(), span = state.span());
    let update_struct = update_struct(input, &update, &fields);
    let builders = builders(state, &update, &fields);
    let merges = fields.iter().map(merge_call);
    let written = written_fields_body(&fields);
    let unused_writes = fields.is_empty().then(|| quote!(let _ = writes;));
    let (typed_changes, mark_writes) = typed_parts(input, &update, &fields);
    let Versioning {
        version,
        migrate,
        migrate_update,
    } = versioning(struct_attrs);

    Ok(quote! {
        #update_struct
        #builders

        #[automatically_derived]
        impl ::stategraph::state::Update for #update {
            fn written_fields(&self) -> ::std::vec::Vec<&'static str> {
                #written
            }
            #mark_writes
        }

        #[automatically_derived]
        impl ::stategraph::state::State for #state {
            type Update = #update;
            #version

            fn apply(
                &mut self,
                writes: &mut [::stategraph::state::TaggedUpdate<#update>],
            ) -> ::core::result::Result<(), ::stategraph::state::MergeError> {
                #(#merges)*
                #unused_writes
                ::core::result::Result::Ok(())
            }

            #migrate
            #migrate_update
            #typed_changes
        }

        #[automatically_derived]
        impl ::core::convert::From<#update> for ::stategraph::Command<#state> {
            fn from(update: #update) -> Self {
                ::stategraph::Command::from_update(update)
            }
        }
    })
}

/// The struct's `#[state(...)]` settings and its fields with their reducers. Every attribute
/// error is gathered before giving up, so one build shows them all.
fn read_input(input: &DeriveInput) -> syn::Result<(attrs::StructAttrs, Vec<StateField<'_>>)> {
    let named = named_fields(input)?;
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    let struct_attrs = attrs::struct_attrs(&input.attrs).unwrap_or_else(|e| {
        push(e);
        Default::default()
    });
    let mut fields = Vec::with_capacity(named.len());
    for field in named {
        // `named_fields` only returns named fields.
        let Some(ident) = field.ident.as_ref() else {
            continue;
        };
        match attrs::field_reducer(ident.span(), &field.attrs) {
            Ok(reducer) => fields.push(StateField {
                ident,
                name: ident.unraw().to_string(),
                ty: &field.ty,
                reducer,
                serde: attrs::serde_items(&field.attrs, &["rename", "alias"]),
                plain_serde: attrs::serde_only(&field.attrs, &["rename", "alias", "default"]),
            }),
            Err(e) => push(e),
        }
    }
    if let Err(e) = check_method_names(&fields) {
        push(e);
    }
    match errors {
        Some(e) => Err(e),
        None => Ok((struct_attrs, fields)),
    }
}

/// The typed input and changes for a graph used as a node of this state type (`State`'s
/// typed methods, and `Update::mark_writes`), when the JSON of the state is its fields' own
/// JSON; else nothing, and the trait's JSON defaults are the rule.
fn typed_parts(
    input: &DeriveInput,
    update: &Ident,
    fields: &[StateField],
) -> (TokenStream, TokenStream) {
    let plain = attrs::serde_only(
        &input.attrs,
        &["rename_all", "deny_unknown_fields", "default"],
    ) && fields.iter().all(|f| f.plain_serde);
    if plain {
        (typed_changes(update, fields), mark_writes(fields))
    } else {
        (TokenStream::new(), TokenStream::new())
    }
}

/// The `State` items that the struct's `#[state(version, migrate, migrate_update)]` set.
struct Versioning {
    version: Option<TokenStream>,
    migrate: Option<TokenStream>,
    migrate_update: Option<TokenStream>,
}

fn versioning(struct_attrs: attrs::StructAttrs) -> Versioning {
    let version = struct_attrs.version.map(|(v, span)| {
        let lit = proc_macro2::Literal::u32_unsuffixed(v);
        quote_spanned!(span=> const VERSION: u32 = #lit;)
    });
    let migration = |name: &str, path: syn::Path| {
        // Spanned at the path so a function of the wrong type is reported there; the
        // arguments keep the call-site span to resolve to the parameters below.
        let name = Ident::new(name, Span::call_site());
        let args = quote!((version, value));
        let call = quote_spanned!(path_span(&path)=> #path #args);
        quote! {
            fn #name(
                version: u32,
                value: ::stategraph::__private::serde_json::Value,
            ) -> ::core::result::Result<
                ::stategraph::__private::serde_json::Value,
                ::std::string::String,
            > {
                #call
            }
        }
    };
    Versioning {
        version,
        migrate: struct_attrs.migrate.map(|path| migration("migrate", path)),
        migrate_update: struct_attrs
            .migrate_update
            .map(|path| migration("migrate_update", path)),
    }
}

/// The struct's named fields, or the shape error pointing at what is wrong.
fn named_fields(input: &DeriveInput) -> syn::Result<&Punctuated<syn::Field, syn::token::Comma>> {
    let data = match &input.data {
        Data::Struct(data) => data,
        Data::Enum(data) => return Err(syn::Error::new(data.enum_token.span, SHAPE_ERROR)),
        Data::Union(data) => return Err(syn::Error::new(data.union_token.span, SHAPE_ERROR)),
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&input.generics, SHAPE_ERROR));
    }
    match &data.fields {
        Fields::Named(named) => Ok(&named.named),
        Fields::Unnamed(unnamed) => Err(syn::Error::new_spanned(unnamed, SHAPE_ERROR)),
        Fields::Unit => Err(syn::Error::new(input.ident.span(), SHAPE_ERROR)),
    }
}

/// Rejects fields whose generated builder names collide, which would otherwise surface as a
/// "duplicate definitions" error pointing into macro output.
fn check_method_names(fields: &[StateField]) -> syn::Result<()> {
    let mut owners: HashMap<String, &str> = HashMap::new();
    owners.insert(WRITTEN_FIELDS.to_string(), "");
    let mut errors: Option<syn::Error> = None;
    for field in fields {
        for method in [field.name.clone(), format!("overwrite_{}", field.name)] {
            let Some(owner) = owners.get(&method) else {
                owners.insert(method, &field.name);
                continue;
            };
            let clash = if owner.is_empty() {
                format!("the update's `{WRITTEN_FIELDS}()` method")
            } else {
                format!("the `{method}` builder of field `{owner}`")
            };
            let e = syn::Error::new(
                field.ident.span(),
                format!(
                    "field `{}` would generate an update method `{method}` that clashes with \
                     {clash}; rename the field (`#[serde(rename = \"{}\")]` keeps its JSON name)",
                    field.name, field.name
                ),
            );
            match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            }
        }
    }
    errors.map_or(Ok(()), Err)
}

fn update_struct(input: &DeriveInput, update: &Ident, fields: &[StateField]) -> TokenStream {
    let vis = &input.vis;
    let state = input.ident.unraw();
    let rename_all = attrs::serde_items(&input.attrs, &["rename_all"]);
    let doc = format!(
        " A partial write to [`{state}`]: each field a node sets is merged into the state \
         through that field's reducer.\n\n Build one with `{update}::default()` and the builder \
         methods. In JSON a field's value goes through its reducer and `{{\"$overwrite\": value}}` \
         replaces the value instead; `null` writes `None` to an `Option` field (and is no write \
         to a field that cannot hold it); unknown fields are rejected."
    );
    // serde reads a field's `null` as "no write" for an `Option`, so a node's write of `None`
    // would be lost when the update is read back from a checkpoint: this reads it as a write
    // wherever the field's type holds a null.
    let present = format!("{update}::__present_write");
    let decls = fields.iter().map(|f| {
        let ident = f.ident;
        let ty = f.ty;
        let serde = &f.serde;
        let doc = format!(" The write to [`{state}::{}`], if any.", f.name);
        quote! {
            #[doc = #doc]
            #[serde(skip_serializing_if = "::core::option::Option::is_none")]
            #[serde(deserialize_with = #present)]
            #(#[serde(#serde)])*
            pub #ident: ::core::option::Option<::stategraph::state::Write<#ty>>,
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(
            ::core::clone::Clone,
            ::core::fmt::Debug,
            ::core::default::Default,
            ::stategraph::__private::serde::Serialize,
            ::stategraph::__private::serde::Deserialize,
        )]
        #[serde(crate = "::stategraph::__private::serde", default, deny_unknown_fields)]
        #(#[serde(#rename_all)])*
        #vis struct #update {
            #(#decls)*
        }

        #[automatically_derived]
        impl #update {
            /// A field that is present is a write, `null` included when the field's type holds
            /// it (an `Option` set to `None`); a `null` it cannot hold is no write. An absent
            /// field is the container's default: no write.
            #[doc(hidden)]
            fn __present_write<'de, D, T>(
                deserializer: D,
            ) -> ::core::result::Result<
                ::core::option::Option<::stategraph::state::Write<T>>,
                D::Error,
            >
            where
                D: ::stategraph::__private::serde::Deserializer<'de>,
                T: ::stategraph::__private::serde::de::DeserializeOwned,
            {
                use ::stategraph::__private::serde::de::Error as _;
                use ::stategraph::__private::serde::Deserialize as _;
                use ::stategraph::__private::serde_json::{from_value, Value};
                let value = Value::deserialize(deserializer)?;
                if value.is_null() {
                    return ::core::result::Result::Ok(
                        from_value::<T>(value).ok().map(::stategraph::state::Write::Reduce),
                    );
                }
                ::stategraph::state::Write::<T>::deserialize(value)
                    .map(::core::option::Option::Some)
                    .map_err(D::Error::custom)
            }
        }
    }
}

fn builders(state: &Ident, update: &Ident, fields: &[StateField]) -> TokenStream {
    let state = state.unraw();
    let methods = fields.iter().map(|f| {
        let ident = f.ident;
        let ty = f.ty;
        let overwrite = format_ident!("overwrite_{}", f.name, span = ident.span());
        let reduce_doc = reduce_doc(&state, f);
        let overwrite_doc = format!(
            " Replaces [`{state}::{name}`] with `value`, bypassing its reducer. At most one node \
             may do this to `{name}` in a superstep, and it is that step's final word on \
             `{name}`: other writes to it in the step are dropped.",
            name = f.name
        );
        // `impl Into<u32>` would make `.turns(1)` fail: the literal falls back to `i32`, and
        // `u32: From<i32>` does not hold. Numbers gain little from `Into` anyway, so they are
        // taken as they are; everything else takes `impl Into` (`.topic("rust")` for a String).
        let (param, value) = if is_primitive_number(ty) {
            (quote!(#ty), quote!(value))
        } else {
            (
                quote!(impl ::core::convert::Into<#ty>),
                quote!(::core::convert::Into::into(value)),
            )
        };
        quote! {
            #[doc = #reduce_doc]
            #[must_use]
            pub fn #ident(mut self, value: #param) -> Self {
                self.#ident = ::core::option::Option::Some(
                    ::stategraph::state::Write::Reduce(#value),
                );
                self
            }

            #[doc = #overwrite_doc]
            #[must_use]
            pub fn #overwrite(mut self, value: #param) -> Self {
                self.#ident = ::core::option::Option::Some(
                    ::stategraph::state::Write::Overwrite(#value),
                );
                self
            }
        }
    });
    let written = written_fields_body(fields);
    quote! {
        // Method names come from field names, which may be anything: `is_done`, `add`,
        // `new`... Lints about such names are the struct author's business, not the update's.
        #[allow(
            non_snake_case,
            clippy::wrong_self_convention,
            clippy::should_implement_trait,
            clippy::new_ret_no_self
        )]
        impl #update {
            #(#methods)*

            /// The names of the fields this update writes, in declaration order. The same as
            /// `Update::written_fields`, here so callers need not import the trait.
            pub fn written_fields(&self) -> ::std::vec::Vec<&'static str> {
                #written
            }
        }
    }
}

/// True for a field type written as a bare primitive number (`u32`, `f64`...). A type alias
/// of one is not seen through; its builders take `impl Into`, where a typed literal (`1u32`)
/// still works.
fn is_primitive_number(ty: &Type) -> bool {
    const NUMBERS: [&str; 14] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64",
    ];
    match ty {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .get_ident()
            .is_some_and(|ident| NUMBERS.iter().any(|n| ident == n)),
        Type::Group(g) => is_primitive_number(&g.elem),
        Type::Paren(p) => is_primitive_number(&p.elem),
        _ => false,
    }
}

/// The doc of a field's reduce builder: says what the field's reducer does with the value.
fn reduce_doc(state: &Ident, f: &StateField) -> String {
    let field = format!("[`{state}::{}`]", f.name);
    let how = match &f.reducer {
        Reducer::Builtin(Builtin::Overwrite, _) => format!(
            "Sets {field} to `value`. The field keeps one value per superstep (reducer: \
             overwrite), so two nodes writing it in the same step is an error."
        ),
        Reducer::Builtin(Builtin::Append, _) => {
            format!("Appends `value` to {field} (reducer: append).")
        }
        Reducer::Builtin(Builtin::Add, _) => format!("Adds `value` to {field} (reducer: add)."),
        Reducer::Builtin(Builtin::MergeById, _) => format!(
            "Merges the records in `value` into {field} by key (reducer: merge_by_id): each \
             replaces the stored record with the same key, or is appended if its key is new."
        ),
        Reducer::Type(ty) => format!(
            "Writes `value` to {field} through the reducer `{}`.",
            attrs::path_string(ty)
        ),
        Reducer::With(path) => format!(
            "Writes `value` to {field} through `{}`.",
            attrs::path_string(path)
        ),
    };
    let fold = match f.reducer {
        Reducer::Builtin(Builtin::Overwrite, _) => "",
        _ => " Writes from several nodes in one superstep fold in task order.",
    };
    format!(" {how}{fold}")
}

/// Builds the list of written fields; `Vec::new` does not allocate when nothing was written.
fn written_fields_body(fields: &[StateField]) -> TokenStream {
    let pushes = fields.iter().map(|f| {
        let ident = f.ident;
        let name = &f.name;
        quote! {
            if self.#ident.is_some() {
                written.push(#name);
            }
        }
    });
    quote! {
        #[allow(unused_mut)]
        let mut written = ::std::vec::Vec::new();
        #(#pushes)*
        written
    }
}

/// One field's merge in `State::apply`.
fn merge_call(f: &StateField) -> TokenStream {
    let ident = f.ident;
    let name = &f.name;
    let ty = f.ty;
    let (span, exclusive, reduce) = match &f.reducer {
        Reducer::Builtin(builtin, span) => {
            let reducer = Ident::new(builtin.type_name(), *span);
            let reducer = quote_spanned!(*span=> ::stategraph::state::#reducer);
            reducer_fns(&reducer, ty, *span)
        }
        Reducer::Type(reducer) => {
            reducer_fns(&quote!(#reducer), ty, syn::spanned::Spanned::span(reducer))
        }
        Reducer::With(path) => {
            let span = path_span(path);
            (span, quote!(false), quote_spanned!(span=> #path))
        }
    };
    // The call is spanned at the attribute (or at the field, for the default), so
    // "`Append: Reducer<u32>` is not satisfied" or a `with` function of the wrong type points at
    // `#[state(...)]`: the call's own obligations would otherwise be reported at the derive.
    // `self` and the locals keep the call-site span, or they would not resolve when the struct
    // comes out of a `macro_rules!` macro.
    let current = quote!(&mut self.#ident);
    let writes = quote!(&mut *writes);
    let slot = quote!(|update| &mut update.#ident);
    quote_spanned! {span=>
        ::stategraph::state::merge_field(#name, #current, #writes, #slot, #exclusive, #reduce)?;
    }
}

fn reducer_fns(reducer: &TokenStream, ty: &Type, span: Span) -> (Span, TokenStream, TokenStream) {
    (
        span,
        quote_spanned!(span=> <#reducer as ::stategraph::state::Reducer<#ty>>::EXCLUSIVE),
        quote_spanned!(span=> <#reducer as ::stategraph::state::Reducer<#ty>>::reduce),
    )
}

fn path_span(path: &syn::Path) -> Span {
    syn::spanned::Spanned::span(path)
}

/// `State::whole_update` and `State::changes_since`, field by field: fields the marks say were
/// not written are unchanged, a field written through its reducer alone asks the reducer for
/// the net write, the rest are compared as JSON (`state::field_change`).
fn typed_changes(update: &Ident, fields: &[StateField]) -> TokenStream {
    // Locals named after the fields would shadow `before` or `marks` if a field were so named.
    let idents: Vec<&Ident> = fields.iter().map(|f| f.ident).collect();
    let locals: Vec<Ident> = fields
        .iter()
        .map(|f| format_ident!("__field_{}", f.name))
        .collect();
    let changes = fields
        .iter()
        .zip(&locals)
        .enumerate()
        .map(|(index, (f, local))| {
            let ident = f.ident;
            let name = &f.name;
            let ty = f.ty;
            let (net, reduce, replaces) = match &f.reducer {
                Reducer::Builtin(builtin, span) => {
                    let reducer = Ident::new(builtin.type_name(), *span);
                    reducer_change_fns(&quote!(::stategraph::state::#reducer), ty)
                }
                Reducer::Type(reducer) => reducer_change_fns(&quote!(#reducer), ty),
                Reducer::With(path) => (
                    quote!(|_: &#ty, after: #ty| ::core::result::Result::Err(after)),
                    quote!(#path),
                    quote!(false),
                ),
            };
            quote! {
                #ident: ::stategraph::state::field_change(
                    #name, &before.#ident, #local, marks.of(#index), #net, #reduce, #replaces,
                )?,
            }
        });
    quote! {
        fn whole_update(&self) -> ::core::result::Result<#update, ::std::string::String> {
            let Self { #(#idents: #locals),* } = ::core::clone::Clone::clone(self);
            ::core::result::Result::Ok(#update {
                #(#idents: ::core::option::Option::Some(::stategraph::state::Write::Overwrite(#locals)),)*
            })
        }

        fn changes_since(
            self,
            before: &Self,
            marks: ::core::option::Option<&::stategraph::state::WriteMarks>,
        ) -> ::core::result::Result<#update, ::std::string::String> {
            let marks = match marks {
                ::core::option::Option::Some(marks) if marks.is_tracked() => marks,
                _ => return ::stategraph::state::changes_from_json(before, &self),
            };
            let Self { #(#idents: #locals),* } = self;
            ::core::result::Result::Ok(#update {
                #(#changes)*
            })
        }
    }
}

/// A reducer type's `net_write`, `reduce` and `REPLACES`, as `state::field_change` takes them.
fn reducer_change_fns(reducer: &TokenStream, ty: &Type) -> (TokenStream, TokenStream, TokenStream) {
    (
        quote!(<#reducer as ::stategraph::state::Reducer<#ty>>::net_write),
        quote!(<#reducer as ::stategraph::state::Reducer<#ty>>::reduce),
        quote!(<#reducer as ::stategraph::state::Reducer<#ty>>::REPLACES),
    )
}

/// `Update::mark_writes`: each written field's position, and whether it is an overwrite.
fn mark_writes(fields: &[StateField]) -> TokenStream {
    let marks = fields.iter().enumerate().map(|(index, f)| {
        let ident = f.ident;
        quote! {
            if let ::core::option::Option::Some(write) = &self.#ident {
                marks.record(#index, write.is_overwrite());
            }
        }
    });
    quote! {
        fn mark_writes(&self, marks: &mut ::stategraph::state::WriteMarks) {
            #(#marks)*
            let _ = marks;
        }
    }
}
