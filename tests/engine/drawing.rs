//! Mermaid and DOT exports, with conditional edges labelled.

use super::Log;
use stategraph::runtime::Context;
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

fn graph() -> stategraph::CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::named("review loop");
    for n in ["write", "check", "left", "right", "join"] {
        g.add_node(n, |_s: Arc<Log>, _c: Context| async {
            Ok(super::LogUpdate::default())
        });
    }
    g.add_edge(START, "write").add_edge("write", "check");
    g.add_conditional_edges("check", |_s: &Log| END, ["write", "left", END])
        .label("needs work?");
    g.add_edge("check", "right");
    g.add_join(["left", "right"], "join");
    g.add_edge("join", END);
    g.compile().unwrap()
}

#[test]
fn mermaid_draws_every_node_and_labels_conditional_edges() {
    let m = graph().to_mermaid();
    assert!(m.starts_with("graph TD;"));
    for line in [
        "__start__ --> write;",
        "write --> check;",
        "check -.->|\"needs work?\"| write;",
        "check -.->|\"needs work?\"| __end__;",
        "left -->|\"join\"| join;",
    ] {
        assert!(m.contains(line), "missing `{line}` in\n{m}");
    }
}

#[test]
fn dot_draws_conditional_edges_dashed_and_labelled() {
    let d = graph().to_dot();
    assert!(d.starts_with("digraph \"review loop\" {"));
    assert!(
        d.contains("\"check\" -> \"write\" [style=dashed, label=\"needs work?\"];"),
        "{d}"
    );
    assert!(d.contains("\"__start__\" -> \"write\";"), "{d}");
    assert!(d.trim_end().ends_with('}'));
}
