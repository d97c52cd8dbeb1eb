//! Edits on older checkpoints (branches), several edits at once, and history with values.

use crate::{input, store, Foo, FooUpdate};
use stategraph::runtime::{Context, HistoryQuery, NodeError, RunConfig, RunError, StateEdit};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

/// `node_a` sets foo, `node_b` logs; paused before node_a, so the thread exists.
fn a_then_b() -> stategraph::graph::CompiledGraph<Foo> {
    let mut g = StateGraph::<Foo>::new();
    g.add_node("node_a", |_s: Arc<Foo>, _c: Context| async {
        Ok::<_, NodeError>(FooUpdate::default().foo("bar".to_string()))
    });
    g.add_node("node_b", |_s: Arc<Foo>, _c: Context| async {
        Ok::<_, NodeError>(FooUpdate::default().log(vec!["qux".to_string()]))
    });
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().unwrap().with_checkpointer(store())
}

/// LangGraph: test_pregel.py::test_invoke_checkpoint_three — `update_state` on an older
/// checkpoint of the thread writes a new checkpoint whose parent is that one; it is the
/// thread's newest; history entries carry their values.
#[tokio::test]
async fn an_edit_of_an_older_checkpoint_starts_a_branch_and_history_carries_values() {
    let graph = a_then_b();
    graph
        .invoke(input("start"), RunConfig::new().thread("1"))
        .await
        .unwrap();
    let history = graph
        .get_state_history("1", HistoryQuery::default())
        .await
        .unwrap();
    // Newest first: after node_b, after node_a, the input.
    let values: Vec<(String, usize)> = history
        .iter()
        .map(|h| (h.values.foo.clone(), h.values.log.len()))
        .collect();
    assert_eq!(
        values,
        [
            ("bar".to_string(), 1),
            ("bar".to_string(), 0),
            ("start".to_string(), 0)
        ]
    );
    assert_eq!(history[1].next, ["node_b"]);

    let older = history[1].checkpoint_id;
    let edited = graph
        .update_state_at(
            "1",
            older,
            FooUpdate::default().foo("edited".to_string()),
            None,
        )
        .await
        .unwrap();
    let state = graph.get_state("1", None).await.unwrap();
    assert_eq!(
        state.checkpoint_id, edited,
        "the edit is the newest checkpoint"
    );
    assert_eq!(
        state.parent_id,
        Some(older),
        "its parent is the older checkpoint"
    );
    assert_eq!(state.values.foo, "edited");
    assert!(
        state.values.log.is_empty(),
        "the branch does not hold node_b's write"
    );
    assert_eq!(
        state.metadata.writers,
        ["node_a"],
        "it stands for the last writer there"
    );
    assert_eq!(state.next, ["node_b"]);
    assert_eq!(
        graph
            .history("1", HistoryQuery::default())
            .await
            .unwrap()
            .len(),
        4
    );
    let done = graph
        .resume("1", stategraph::runtime::Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        (done.state.foo.as_str(), done.state.log.len()),
        ("edited", 1)
    );
}

/// LangGraph: test_pregel.py::test_bulk_state_updates — several edits applied at once: each
/// inner list is one checkpoint; several edits in one step each name their node; empty input
/// and an END edit among others are refused.
#[tokio::test]
async fn several_edits_apply_at_once() {
    let graph = a_then_b().interrupt_before(["node_a"]).unwrap();
    graph
        .invoke(input(""), RunConfig::new().thread("2"))
        .await
        .unwrap();
    let before = checkpoints(&graph, "2").await;
    graph
        .bulk_update_state(
            "2",
            vec![
                vec![StateEdit::as_node(
                    FooUpdate::default().foo("bar".to_string()),
                    "node_a",
                )],
                vec![
                    StateEdit::as_node(FooUpdate::default().foo("updated".to_string()), "node_a"),
                    StateEdit::as_node(FooUpdate::default().log(vec!["new".to_string()]), "node_b"),
                ],
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        checkpoints(&graph, "2").await - before,
        2,
        "one checkpoint per inner list"
    );
    let state = graph.get_state("2", None).await.unwrap();
    assert_eq!(state.values.foo, "updated");
    assert_eq!(state.values.log, ["new"]);
    assert_eq!(state.metadata.writers, ["node_a", "node_b"]);
    // node_a's edge leads to node_b, node_b's to END.
    assert_eq!(state.next, ["node_b"]);

    let refused = |r: Result<_, RunError>| matches!(r, Err(RunError::InvalidInput(_)));
    assert!(refused(graph.bulk_update_state("2", vec![]).await));
    assert!(refused(
        graph.bulk_update_state("2", vec![vec![], vec![]]).await
    ));
    let unnamed = || StateEdit {
        update: FooUpdate::default(),
        as_node: None,
    };
    assert!(refused(
        graph
            .bulk_update_state("2", vec![vec![unnamed(), unnamed()]])
            .await
    ));
    let end = StateEdit::as_node(FooUpdate::default(), END);
    let a = StateEdit::as_node(FooUpdate::default(), "node_a");
    assert!(refused(
        graph.bulk_update_state("2", vec![vec![end, a]]).await
    ));
    assert_eq!(
        checkpoints(&graph, "2").await - before,
        2,
        "nothing refused was written"
    );
}

async fn checkpoints(graph: &stategraph::graph::CompiledGraph<Foo>, thread: &str) -> usize {
    graph
        .history(thread, HistoryQuery::default())
        .await
        .unwrap()
        .len()
}
