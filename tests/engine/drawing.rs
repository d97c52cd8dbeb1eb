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

/// `START -> outer -> END`, `outer` running `middle` (`m -> inner`), `inner` running a leaf
/// graph (`leaf`).
fn nested() -> stategraph::CompiledGraph<Log> {
    let noop = |_s: Arc<Log>, _c: Context| async { Ok(super::LogUpdate::default()) };
    let mut leaf = StateGraph::<Log>::named("leaf");
    leaf.add_node("leaf", noop);
    leaf.add_edge(START, "leaf").add_edge("leaf", END);
    let mut middle = StateGraph::<Log>::named("middle");
    middle.add_node("m", noop);
    middle.add_node("inner", leaf.compile().unwrap());
    middle
        .add_edge(START, "m")
        .add_edge("m", "inner")
        .add_edge("inner", END);
    let middle = middle.compile().unwrap();
    let mut g = StateGraph::<Log>::named("top");
    g.add_node("first", noop);
    // A closure node declares the graph it runs, so drawings can expand it.
    let run = middle.clone();
    g.add_node("outer", move |s: Arc<Log>, ctx: Context| {
        let middle = run.clone();
        async move {
            let out = ctx
                .run_subgraph(&middle, super::LogUpdate::default())
                .await?;
            let _ = (s, out);
            Ok(super::LogUpdate::default())
        }
    })
    .subgraph(&middle);
    g.add_edge(START, "first")
        .add_edge("first", "outer")
        .add_edge("outer", END);
    g.compile().unwrap()
}

#[test]
fn xray_draws_subgraphs_inside_the_nodes_that_run_them() {
    let g = nested();
    let flat = g.to_mermaid();
    assert!(flat.contains("\touter(\"outer\")"), "{flat}");
    assert!(!flat.contains("subgraph"), "{flat}");

    let one = g.to_mermaid_with(stategraph::graph::DrawOptions::xray(1));
    let expected = [
        "\tsubgraph outer[\"outer\"]",
        "\t\touter____start__([\"START\"]):::first",
        "\t\touter__m(\"m\")",
        "\t\touter__inner(\"inner\")",
        "\t\touter____start__ --> outer__m;",
        "\t\touter__m --> outer__inner;",
        "\t\touter__inner --> outer____end__;",
        "\tend",
        "\tfirst --> outer;",
        "\touter --> __end__;",
    ];
    for line in expected {
        assert!(one.lines().any(|l| l == line), "missing `{line}` in\n{one}");
    }
    assert!(
        !one.contains("outer__inner__leaf"),
        "one level only:\n{one}"
    );

    let two = g.to_mermaid_with(stategraph::graph::DrawOptions::xray(2));
    for line in [
        "\t\tsubgraph outer__inner[\"inner\"]",
        "\t\t\touter__inner__leaf(\"leaf\")",
        "\t\t\touter__inner____start__ --> outer__inner__leaf;",
        "\t\tend",
    ] {
        assert!(two.lines().any(|l| l == line), "missing `{line}` in\n{two}");
    }
    // Every block is closed.
    let opened = two
        .lines()
        .filter(|l| l.trim_start().starts_with("subgraph "))
        .count();
    let closed = two.lines().filter(|l| l.trim() == "end").count();
    assert_eq!((opened, closed), (2, 2), "{two}");
}
