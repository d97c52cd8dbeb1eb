//! Building the registered research graph: with no model configured it fails at once saying
//! how to configure one; bad settings are refused by name. (One test per concern; this file
//! changes the process environment, so it holds nothing else.)

use stategraph::agents::research::Research;
use stategraph::llm::FakeChatModel;
use stategraph::registry::Registry;
use std::sync::Arc;

#[test]
fn building_without_a_model_says_how_to_configure_one_and_bad_settings_are_named() {
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "GRAPH_PROVIDER",
    ] {
        std::env::remove_var(var);
    }
    let mut registry = Registry::new();
    registry.register(Research::from_env());
    let resolved = registry
        .resolve("research", &["search.corpus=.".parse().unwrap()])
        .unwrap();
    let err = resolved.build(None).err().unwrap().to_string();
    for needle in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "GRAPH_MODEL",
    ] {
        assert!(err.contains(needle), "missing {needle} in: {err}");
    }

    let mut registry = Registry::new();
    registry.register(Research::with_model(Arc::new(FakeChatModel::new())));
    let typo = registry
        .resolve("research", &["search.corpuss=.".parse().unwrap()])
        .unwrap();
    let err = typo.build(None).err().unwrap().to_string();
    assert!(err.contains("corpuss"), "{err}");
    let missing = registry
        .resolve(
            "research",
            &["search.corpus=/definitely/not/here".parse().unwrap()],
        )
        .unwrap();
    let err = missing.build(None).err().unwrap().to_string();
    assert!(
        err.contains("search.corpus") && err.contains("not a folder"),
        "{err}"
    );
    let ok = registry
        .resolve(
            "research",
            &[
                "search.corpus=.".parse().unwrap(),
                "limits.max_todos=4".parse().unwrap(),
            ],
        )
        .unwrap();
    assert!(ok.build(None).is_ok());
}
