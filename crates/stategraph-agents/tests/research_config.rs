//! Building the registered research graph: with no model configured it still builds (to list,
//! draw and inspect threads), and the preflight before a run fails at once saying how to
//! configure one, printed once; bad settings are refused by name. (This file changes the
//! process environment, so it holds nothing else.)

use stategraph_agents::research::Research;
use stategraph_llm::FakeChatModel;
use stategraph_registry::Registry;
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
    assert!(resolved.build(None).is_ok(), "building needs no model");
    let err = chain(&resolved.preflight().err().unwrap());
    assert_eq!(
        err.matches("no model provider is configured").count(),
        1,
        "said once: {err}"
    );
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
    // A misspelt setting is refused when the graph is resolved, before anything is built.
    let typo = registry
        .resolve("research", &["search.corpuss=.".parse().unwrap()])
        .err()
        .unwrap();
    let err = chain(&typo);
    assert!(
        err.contains("corpuss") && err.contains("did you mean `search.corpus`?"),
        "{err}"
    );
    let missing = registry
        .resolve(
            "research",
            &["search.corpus=/definitely/not/here".parse().unwrap()],
        )
        .unwrap();
    let err = chain(&missing.preflight().err().unwrap());
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
    assert!(ok.preflight().is_ok());
    assert!(ok.build(None).is_ok());
}

/// The error and its causes, as a report prints them (`{:#}` of an anyhow error).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
