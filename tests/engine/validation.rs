//! Compile-time checks: every problem reported at once, each saying what to fix.

use super::Log;
use stategraph::graph::GraphError;
use stategraph::runtime::Context;
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

fn noop(g: &mut StateGraph<Log>, name: &str) {
    g.add_node(name, |_s: Arc<Log>, _c: Context| async {
        Ok(super::LogUpdate::default())
    });
}

fn problems(g: StateGraph<Log>) -> Vec<String> {
    match g.compile() {
        Err(GraphError::Invalid(p)) => p,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => Vec::new(),
    }
}

#[test]
fn unknown_edge_targets_and_sources_are_named() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    g.add_edge(START, "a")
        .add_edge("a", "nowhere")
        .add_edge("ghost", "a");
    let p = problems(g).join("\n");
    assert!(p.contains("goes to `nowhere`, which is not a node"), "{p}");
    assert!(p.contains("starts at `ghost`, which is not a node"), "{p}");
}

#[test]
fn unreachable_nodes_dead_ends_and_traps_are_reported_together() {
    let mut g = StateGraph::<Log>::new();
    for n in ["a", "island", "dead_end", "trap1", "trap2"] {
        noop(&mut g, n);
    }
    g.add_edge(START, "a").add_edge("a", END);
    g.add_edge("island", END);
    g.add_edge(START, "dead_end");
    g.add_edge(START, "trap1")
        .add_edge("trap1", "trap2")
        .add_edge("trap2", "trap1");
    let p = problems(g);
    let text = p.join("\n");
    assert!(text.contains("node `island` can never run"), "{text}");
    assert!(text.contains("node `dead_end` has no way out"), "{text}");
    assert!(
        text.contains("from node `trap1` the run can never reach END"),
        "{text}"
    );
    assert_eq!(p.len(), 4, "{text}");
}

#[test]
fn duplicate_and_reserved_names_are_refused() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    noop(&mut g, "a");
    noop(&mut g, START);
    g.add_edge(START, "a").add_edge("a", END);
    let p = problems(g).join("\n");
    assert!(p.contains("two nodes are named `a`"), "{p}");
    assert!(p.contains("reserved"), "{p}");
}

#[test]
fn a_graph_without_an_entry_point_says_how_to_add_one() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    g.add_edge("a", END);
    let p = problems(g).join("\n");
    assert!(p.contains("no entry point: add an edge from START"), "{p}");
}

#[test]
fn routers_must_declare_targets_and_their_targets_must_exist() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_s: &Log| END, Vec::<String>::new());
    g.add_conditional_edges("a", |_s: &Log| END, ["missing", END]);
    let p = problems(g).join("\n");
    assert!(p.contains("declares no targets"), "{p}");
    assert!(p.contains("goes to `missing`"), "{p}");
}

#[test]
fn interrupt_names_are_checked_against_the_graph() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    g.add_edge(START, "a").add_edge("a", END);
    let err = g.compile().unwrap().interrupt_before(["b"]).err().unwrap();
    assert!(
        err.to_string().contains("no node named `b`") && err.to_string().contains("a"),
        "{err}"
    );
}

#[test]
fn a_sound_graph_compiles() {
    let mut g = StateGraph::<Log>::new();
    noop(&mut g, "a");
    noop(&mut g, "b");
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_s: &Log| "b", ["b", END]);
    g.add_edge("b", "a");
    assert!(problems(g).is_empty());
}
