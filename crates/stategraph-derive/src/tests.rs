//! The macros' error messages, checked on token input directly: much faster than compile-fail
//! tests, which would rebuild all of `stategraph`'s dependencies in a target dir of their own.
//! What the generated code does is tested from the outside, in `tests/derive_state.rs`.

use syn::DeriveInput;

fn state_errors(input: DeriveInput) -> Vec<String> {
    match crate::state::expand(&input) {
        Ok(_) => Vec::new(),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn keyed_error(input: DeriveInput) -> String {
    match crate::keyed::expand(&input) {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(e) => e.to_string(),
    }
}

fn assert_one_error(errors: &[String], needles: &[&str]) {
    assert_eq!(errors.len(), 1, "{errors:#?}");
    for needle in needles {
        assert!(
            errors[0].contains(needle),
            "{:?} lacks {needle:?}",
            errors[0]
        );
    }
}

const SHAPE: &str = "derive(State) needs a struct with named fields and no generic parameters";

#[test]
fn state_rejects_what_is_not_a_plain_named_struct() {
    assert_one_error(
        &state_errors(syn::parse_quote!(
            enum E {
                A,
            }
        )),
        &[SHAPE],
    );
    assert_one_error(
        &state_errors(syn::parse_quote!(
            struct T(u8);
        )),
        &[SHAPE],
    );
    assert_one_error(
        &state_errors(syn::parse_quote!(
            struct U;
        )),
        &[SHAPE],
    );
    assert_one_error(
        &state_errors(syn::parse_quote!(
            struct G<T> {
                t: T,
            }
        )),
        &[SHAPE],
    );
}

#[test]
fn an_unknown_field_key_is_named_with_the_valid_ones() {
    let errors = state_errors(syn::parse_quote! {
        struct S { #[state(apend)] log: Vec<String> }
    });
    assert_one_error(
        &errors,
        &[
            "`apend`",
            "`append`",
            "`merge_by_id`",
            "`reducer = Type`",
            "`with = ",
        ],
    );
}

#[test]
fn two_reducers_on_a_field_are_refused_even_across_attributes() {
    for input in [
        syn::parse_quote!(
            struct S {
                #[state(append, add)]
                n: Vec<u8>,
            }
        ),
        syn::parse_quote!(
            struct S {
                #[state(append)]
                #[state(with = f)]
                n: Vec<u8>,
            }
        ),
    ] {
        let errors = state_errors(input);
        assert_one_error(&errors, &["two reducers", "`append`", "`overwrite`"]);
    }
}

#[test]
fn every_bad_field_is_reported_at_once() {
    let errors = state_errors(syn::parse_quote! {
        struct S {
            #[state(nope)] a: u8,
            #[state(append = true)] b: Vec<u8>,
            #[state(version = 2)] c: u8,
        }
    });
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors[0].contains("`nope`"));
    assert!(errors[1].contains("`append` takes no value"));
    assert!(errors[2].contains("go on the struct"));
}

#[test]
fn struct_attribute_errors_name_the_key() {
    let errors = state_errors(syn::parse_quote! {
        #[state(append)]
        struct S { a: u8 }
    });
    assert_one_error(&errors, &["`append`", "`version = N`", "go on fields"]);

    let errors = state_errors(syn::parse_quote! {
        #[state(version = 1, version = 2)]
        struct S { a: u8 }
    });
    assert_one_error(&errors, &["`version` is given twice"]);

    let errors = state_errors(syn::parse_quote! {
        #[state(version = "2")]
        struct S { a: u8 }
    });
    assert_one_error(&errors, &["expected integer literal"]);
}

#[test]
fn builder_names_that_clash_are_refused() {
    let errors = state_errors(syn::parse_quote! {
        struct S { text: String, overwrite_text: String }
    });
    assert_one_error(&errors, &["`overwrite_text`", "field `text`"]);

    let errors = state_errors(syn::parse_quote! {
        struct S { written_fields: u8 }
    });
    assert_one_error(&errors, &["written_fields()"]);
}

#[test]
fn a_valid_state_expands_to_items() {
    let input: DeriveInput = syn::parse_quote! {
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        #[state(version = 2, migrate = up)]
        pub struct Chat {
            #[state(append)] #[serde(alias = "msgs", default)] messages: Vec<String>,
            #[state(reducer = my::Max)] best: u32,
            #[state(with = join)] r#type: String,
        }
    };
    let tokens = crate::state::expand(&input).expect("expands");
    let file: syn::File = syn::parse2(tokens.clone()).expect("generated code parses");
    assert_eq!(
        file.items.len(),
        6,
        "struct, builders, Update, its null-reading helper, State, From"
    );
    let text = tokens.to_string();
    // Only the serde items that rename are copied to the update.
    assert!(
        text.contains("# [serde (rename_all = \"camelCase\")]"),
        "{text}"
    );
    assert!(text.contains("# [serde (alias = \"msgs\")]"), "{text}");
    assert!(text.contains("fn overwrite_type"));
    assert!(text.contains("\"type\""));
    assert!(!text.contains("\"r#type\""));
}

#[test]
fn keyed_needs_exactly_one_bare_key_field() {
    let none = keyed_error(syn::parse_quote!(
        struct R {
            id: u8,
        }
    ));
    assert!(none.contains("exactly one field marked #[key]"), "{none}");

    let two = keyed_error(syn::parse_quote!(
        struct R {
            #[key]
            a: u8,
            #[key]
            b: u8,
        }
    ));
    assert!(two.contains("several fields are marked #[key]"), "{two}");

    let args = keyed_error(syn::parse_quote!(
        struct R {
            #[key(x)]
            a: u8,
        }
    ));
    assert!(args.contains("takes no arguments"), "{args}");

    let en = keyed_error(syn::parse_quote!(
        enum R {
            A,
        }
    ));
    assert!(en.contains("derive(Keyed) needs a struct"), "{en}");
}
