//! `bulk_update_state` on a thread that has no checkpoint yet, and what an edit leaves next.

use crate::store;
use serde::{Deserialize, Serialize};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, HistoryQuery, NodeError, Resume, RunConfig, StateEdit};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Turn {
    foo: String,
}

/// `START -> agent -> tool -> END`, each node setting `foo` to its name.
fn agent_then_tool() -> CompiledGraph<Turn> {
    let mut g = StateGraph::<Turn>::new();
    for name in ["agent", "tool"] {
        g.add_node(name, move |_s: Arc<Turn>, _c: Context| async move {
            Ok::<_, NodeError>(TurnUpdate::default().foo(name.to_string()))
        });
    }
    g.add_edge(START, "agent")
        .add_edge("agent", "tool")
        .add_edge("tool", END);
    g.compile().unwrap().with_checkpointer(store())
}

/// A thread's history, newest first, as LangGraph's test maps it: values, next, step.
async fn history(graph: &CompiledGraph<Turn>, thread: &str) -> Vec<(String, Vec<String>, u64)> {
    let mut out = Vec::new();
    for h in graph
        .history(thread, HistoryQuery::default())
        .await
        .unwrap()
    {
        let state = graph
            .get_state(thread, Some(h.checkpoint_id))
            .await
            .unwrap();
        out.push((state.values.foo, h.next, h.step));
    }
    out
}

/// LangGraph: test_pregel.py::test_update_as_input — `bulk_update_state` on a thread with no
/// checkpoint starts it from the empty state: edits as START (the input), then as each node,
/// write the same history, step for step, as two runs of the graph did on another thread. A
/// run's input on a thread that has checkpoints is one step on, as such an edit is.
#[tokio::test]
async fn bulk_edits_of_a_new_thread_write_the_history_its_runs_would() {
    let graph = agent_then_tool();
    for _ in 0..2 {
        let out = graph
            .invoke(
                TurnUpdate::default().foo("input".to_string()),
                RunConfig::new().thread("1"),
            )
            .await
            .unwrap();
        assert_eq!(out.state.foo, "tool");
    }
    let ran = history(&graph, "1").await;
    let steps: Vec<u64> = ran.iter().map(|h| h.2).collect();
    assert_eq!(
        steps,
        [5, 4, 3, 2, 1, 0],
        "one step per checkpoint: {ran:?}"
    );

    let edit = |foo: &str, node: &str| {
        vec![StateEdit::as_node(
            TurnUpdate::default().foo(foo.to_string()),
            node,
        )]
    };
    let turn = || {
        [
            edit("input", START),
            edit("agent", "agent"),
            edit("tool", "tool"),
        ]
    };
    let supersteps: Vec<_> = turn().into_iter().chain(turn()).collect();
    graph.bulk_update_state("2", supersteps).await.unwrap();
    assert_eq!(graph.get_state("2", None).await.unwrap().values.foo, "tool");
    assert_eq!(history(&graph, "2").await, ran);

    // One edit without as_node on a new thread stands for the input: START's edges decide.
    graph
        .update_state("3", TurnUpdate::default().foo("input".to_string()), None)
        .await
        .unwrap();
    let state = graph.get_state("3", None).await.unwrap();
    assert_eq!(
        (state.next, state.step, state.parent_id),
        (vec!["agent".to_string()], 0, None)
    );
    assert_eq!(state.metadata.writers, [START]);
    let done = graph
        .resume("3", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!((done.state.foo.as_str(), done.step), ("tool", 2));
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Docs {
    query: String,
    answer: String,
    #[state(append)]
    docs: Vec<String>,
}

/// LangGraph's fan-out with a deferred `qa`: `rewrite_query` -> (`retriever_one` ->
/// `analyzer_one`, `retriever_two`), both retrievers -> `qa` (deferred), by plain edges or by a
/// join.
fn fan_out_with_deferred_qa(join: bool) -> StateGraph<Docs> {
    let mut g = StateGraph::<Docs>::new();
    g.add_node("rewrite_query", |s: Arc<Docs>, _c: Context| async move {
        Ok::<_, NodeError>(DocsUpdate::default().query(format!("query: {}", s.query)))
    });
    g.add_node("analyzer_one", |s: Arc<Docs>, _c: Context| async move {
        Ok::<_, NodeError>(DocsUpdate::default().query(format!("analyzed: {}", s.query)))
    });
    for (name, docs) in [
        ("retriever_one", ["doc1", "doc2"]),
        ("retriever_two", ["doc3", "doc4"]),
    ] {
        g.add_node(name, move |_s: Arc<Docs>, _c: Context| async move {
            Ok::<_, NodeError>(DocsUpdate::default().docs(docs.map(String::from).to_vec()))
        });
    }
    g.add_node("qa", |s: Arc<Docs>, _c: Context| async move {
        let mut docs = s.docs.clone();
        docs.sort();
        Ok::<_, NodeError>(DocsUpdate::default().answer(docs.join(",")))
    })
    .deferred();
    g.add_edge(START, "rewrite_query")
        .add_edge("rewrite_query", "retriever_one")
        .add_edge("retriever_one", "analyzer_one")
        .add_edge("analyzer_one", END)
        .add_edge("rewrite_query", "retriever_two")
        .add_edge("qa", END);
    if join {
        g.add_join(["retriever_one", "retriever_two"], "qa");
    } else {
        g.add_edge("retriever_one", "qa")
            .add_edge("retriever_two", "qa");
    }
    g
}

/// LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_defer_node (both
/// `use_waiting_edge` cases) — paused before the deferred `qa`, an edit without `as_node`
/// (it stands for `analyzer_one`, which ran alone last) leaves `qa` next at step 4, and the
/// resume runs it on the edited docs.
#[tokio::test]
async fn an_edit_keeps_a_deferred_node_next_whether_reached_by_edges_or_a_join() {
    for join in [false, true] {
        let graph = fan_out_with_deferred_qa(join)
            .compile()
            .unwrap()
            .with_checkpointer(store())
            .interrupt_before(["qa"])
            .unwrap();
        let out = graph
            .invoke(
                DocsUpdate::default().query("what is weather in sf".to_string()),
                RunConfig::new().thread("2"),
            )
            .await
            .unwrap();
        assert!(out.is_interrupted(), "join: {join}");
        assert_eq!(out.state.query, "analyzed: query: what is weather in sf");
        graph
            .update_state(
                "2",
                DocsUpdate::default().docs(vec!["doc5".to_string()]),
                None,
            )
            .await
            .unwrap();
        let state = graph.get_state("2", None).await.unwrap();
        assert_eq!(state.next, ["qa"], "join: {join}");
        assert_eq!(state.metadata.writers, ["analyzer_one"]);
        assert_eq!(state.step, 4);
        assert!(state.interrupts.is_empty());
        let done = graph
            .resume("2", Resume::Continue, RunConfig::new())
            .await
            .unwrap();
        assert_eq!(
            done.state.answer, "doc1,doc2,doc3,doc4,doc5",
            "join: {join}"
        );
    }
}
