//! `#[derive(Keyed)]`: a record's identity for the `merge_by_id` reducer.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Index, Member, Meta};

const SHAPE_ERROR: &str = "derive(Keyed) needs a struct with exactly one field marked #[key]";

pub fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(data) => return Err(syn::Error::new(data.enum_token.span, SHAPE_ERROR)),
        Data::Union(data) => return Err(syn::Error::new(data.union_token.span, SHAPE_ERROR)),
    };
    if let Fields::Unit = fields {
        return Err(syn::Error::new(input.ident.span(), SHAPE_ERROR));
    }

    let mut key = None;
    for (index, field) in fields.iter().enumerate() {
        let Some(attr) = field.attrs.iter().find(|a| a.path().is_ident("key")) else {
            continue;
        };
        if !matches!(attr.meta, Meta::Path(_)) {
            return Err(syn::Error::new_spanned(attr, "`#[key]` takes no arguments"));
        }
        if key.is_some() {
            return Err(syn::Error::new_spanned(
                attr,
                "several fields are marked #[key]: a record has exactly one key field \
                 (for a compound key, make one field a tuple or struct of the parts)",
            ));
        }
        let member = match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(Index::from(index)),
        };
        key = Some((member, &field.ty));
    }
    let Some((member, ty)) = key else {
        return Err(syn::Error::new(
            input.ident.span(),
            format!("{SHAPE_ERROR}; none is"),
        ));
    };

    // Keyed needs nothing of the other fields, so generic records are fine: bound the key type
    // instead of every parameter, as `Record<T>` is keyed whenever its key compares. A concrete
    // key type needs no bound; one that is not `PartialEq` is reported at `type Key`.
    let name = &input.ident;
    let mut generics = input.generics.clone();
    if !generics.params.is_empty() {
        generics
            .make_where_clause()
            .predicates
            .push(syn::parse_quote!(#ty: ::core::cmp::PartialEq));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics ::stategraph::state::Keyed for #name #ty_generics #where_clause {
            type Key = #ty;
            fn key(&self) -> &Self::Key {
                &self.#member
            }
        }
    })
}
