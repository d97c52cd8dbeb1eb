//! `update_state` without `as_node`: the edit stands for the node that wrote last.

use crate::{input, store, Foo, FooUpdate};
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError, RunStatus};
use stategraph::{Route, Send, StateGraph, END, START};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A node that only logs its name (parallel nodes must not all overwrite `foo`).
fn logger(g: &mut StateGraph<Foo>, name: &'static str) {
    g.add_node(name, move |_s: Arc<Foo>, _c: Context| async move {
        Ok::<_, NodeError>(FooUpdate::default().log(vec![name.to_string()]))
    });
}

/// `agent` writes a "tool call" into `foo`; its router sends it to `tool` (one Send per
/// comma-separated call) or ends when there is none; `tool` logs the call it got.
fn react(tool_calls: Arc<AtomicU32>) -> StateGraph<Foo> {
    let mut g = StateGraph::<Foo>::new();
    g.add_node("agent", |_s: Arc<Foo>, _c: Context| async {
        Ok::<_, NodeError>(FooUpdate::default().foo("hi 1,2,3".to_string()))
    });
    g.add_node("tool", move |_s: Arc<Foo>, ctx: Context| {
        tool_calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let call: String = ctx.arg()?;
            Ok::<_, NodeError>(FooUpdate::default().log(vec![call]))
        }
    });
    g.add_edge(START, "agent").add_edge("tool", END);
    g.add_conditional_edges(
        "agent",
        |s: &Foo| -> Route {
            if s.foo.is_empty() {
                END.into()
            } else {
                s.foo
                    .split(';')
                    .map(|call| Send::new("tool", call))
                    .collect::<Vec<_>>()
                    .into()
            }
        },
        ["tool", END],
    );
    g
}

/// LangGraph: test_pregel_async.py::test_send_react_interrupt — paused before the tool, an
/// edit without `as_node` stands for `agent` (the last writer) and re-runs its router: no
/// call left clears the pending Send (the tool never runs); a new call replaces it.
#[tokio::test]
async fn an_edit_without_as_node_reruns_the_last_writers_router() {
    let calls = Arc::new(AtomicU32::new(0));
    let graph = react(calls.clone())
        .compile()
        .unwrap()
        .with_checkpointer(store())
        .interrupt_before(["tool"])
        .unwrap();
    let config = || RunConfig::new().thread("2");
    assert!(graph
        .invoke(input(""), config())
        .await
        .unwrap()
        .is_interrupted());
    assert_eq!(graph.get_state("2", None).await.unwrap().next, ["tool"]);

    // Remove the tool call: the pending task goes.
    graph
        .update_state("2", FooUpdate::default().foo(String::new()), None)
        .await
        .unwrap();
    let state = graph.get_state("2", None).await.unwrap();
    assert!(state.next.is_empty() && state.interrupts.is_empty());
    assert_eq!(state.metadata.writers, ["agent"]);
    let done = graph
        .resume("2", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // Replace the tool call: the old Send goes, the new one is next and runs on resume.
    assert!(graph
        .invoke(input(""), RunConfig::new().thread("3"))
        .await
        .unwrap()
        .is_interrupted());
    graph
        .update_state("3", FooUpdate::default().foo("hi 4,5,6".to_string()), None)
        .await
        .unwrap();
    assert_eq!(graph.get_state("3", None).await.unwrap().next, ["tool"]);
    let done = graph
        .resume("3", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.log, ["hi 4,5,6"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge — paused before
/// `qa`, which a join of two retrievers fired: an edit without `as_node` stands for
/// `retriever_one` (it ran alone in the last step) and `qa` stays next.
#[tokio::test]
async fn an_edit_keeps_a_task_a_join_fired() {
    let mut g = StateGraph::<Foo>::new();
    for name in [
        "rewrite_query",
        "analyzer_one",
        "retriever_one",
        "retriever_two",
        "qa",
    ] {
        logger(&mut g, name);
    }
    g.add_edge(START, "rewrite_query")
        .add_edge("rewrite_query", "analyzer_one")
        .add_edge("analyzer_one", "retriever_one")
        .add_edge("rewrite_query", "retriever_two")
        .add_edge("qa", END);
    g.add_join(["retriever_one", "retriever_two"], "qa");
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(store())
        .interrupt_before(["qa"])
        .unwrap();
    let out = graph
        .invoke(input("q"), RunConfig::new().thread("2"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    graph
        .update_state(
            "2",
            FooUpdate::default().log(vec!["doc5".to_string()]),
            None,
        )
        .await
        .unwrap();
    let state = graph.get_state("2", None).await.unwrap();
    assert_eq!(state.next, ["qa"]);
    assert_eq!(state.metadata.writers, ["retriever_one"]);
    assert!(state.interrupts.is_empty());
    let done = graph
        .resume("2", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.log.last().map(String::as_str), Some("qa"));
    assert!(done.state.log.contains(&"doc5".to_string()));
}

/// LangGraph: update_state's "Ambiguous update, specify as_node" (pregel/main.py
/// bulk_update_state) — two nodes wrote in the last step: an edit without `as_node` is
/// refused and says to pass it; on a thread where only the input was written, the edit
/// stands for START.
#[tokio::test]
async fn an_edit_after_a_parallel_step_needs_as_node() {
    let mut g = StateGraph::<Foo>::new();
    logger(&mut g, "a");
    logger(&mut g, "b");
    logger(&mut g, "c");
    g.add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", "c")
        .add_edge("b", "c")
        .add_edge("c", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(store())
        .interrupt_before(["a", "c"])
        .unwrap();
    graph
        .invoke(input("x"), RunConfig::new().thread("t"))
        .await
        .unwrap();
    // Only the input so far: the edit stands for START, whose edges lead to a and b.
    graph
        .update_state("t", FooUpdate::default().foo("y".to_string()), None)
        .await
        .unwrap();
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.next, ["a", "b"]);
    assert_eq!(state.metadata.writers, [START]);

    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert!(out.is_interrupted());
    assert_eq!(graph.get_state("t", None).await.unwrap().next, ["c"]);
    let err = graph
        .update_state("t", FooUpdate::default(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::AmbiguousEdit { thread_id, nodes } if thread_id == "t" && nodes == &["a", "b"])
            && err.to_string().contains("`a` and `b`")
            && err.to_string().contains("as_node"),
        "{err}"
    );
    graph
        .update_state("t", FooUpdate::default(), Some("b"))
        .await
        .unwrap();
    assert_eq!(graph.get_state("t", None).await.unwrap().next, ["c"]);
}
