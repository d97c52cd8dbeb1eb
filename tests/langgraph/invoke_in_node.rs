//! A graph invoked inside a node (`child.invoke(...)` in the node's body, not
//! `Context::run_subgraph`) runs as the task's child: its pauses pause the parent.

use crate::store;
use serde::{Deserialize, Serialize};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunStatus};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Sub {
    bar: String,
    baz: String,
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Parent {
    foo: String,
}

/// `subgraph_node_1` asks for baz; `subgraph_node_2` appends it to bar.
fn asking_subgraph() -> CompiledGraph<Sub> {
    let mut g = StateGraph::<Sub>::new();
    g.add_node("subgraph_node_1", |_s: Arc<Sub>, ctx: Context| async move {
        let value: String = ctx.interrupt("Provide baz value").await?;
        Ok::<_, NodeError>(SubUpdate::default().baz(value))
    });
    g.add_node("subgraph_node_2", |s: Arc<Sub>, _c: Context| async move {
        Ok::<_, NodeError>(SubUpdate::default().bar(format!("{}{}", s.bar, s.baz)))
    });
    g.add_edge(START, "subgraph_node_1")
        .add_edge("subgraph_node_1", "subgraph_node_2")
        .add_edge("subgraph_node_2", END);
    g.compile().unwrap()
}

/// `node_1` greets; `node_2` invokes the subgraph in its body. With `heed` false, node_2
/// ignores the child's status and returns a result anyway.
fn parent(heed: bool) -> CompiledGraph<Parent> {
    let sub = asking_subgraph();
    let mut g = StateGraph::<Parent>::new();
    g.add_node("node_1", |s: Arc<Parent>, _c: Context| async move {
        Ok::<_, NodeError>(ParentUpdate::default().foo(format!("hi! {}", s.foo)))
    });
    g.add_node("node_2", move |s: Arc<Parent>, _c: Context| {
        let sub = sub.clone();
        async move {
            let out = sub
                .invoke(SubUpdate::default().bar(s.foo.clone()), RunConfig::new())
                .await
                .map_err(|e| NodeError::new(e.to_string()))?;
            if heed && out.is_interrupted() {
                return Ok(ParentUpdate::default());
            }
            Ok::<_, NodeError>(ParentUpdate::default().foo(out.state.bar))
        }
    });
    g.add_edge(START, "node_1")
        .add_edge("node_1", "node_2")
        .add_edge("node_2", END);
    g.compile().unwrap().with_checkpointer(store())
}

/// LangGraph: test_pregel.py::test_subgraph_checkpoint_true_interrupt — the subgraph's
/// interrupt pauses the parent (the parent's result is its state before node_2, with the
/// interrupt); resuming with a value continues inside the subgraph.
#[tokio::test]
async fn an_interrupt_in_a_graph_invoked_inside_a_node_pauses_the_parent() {
    for heed in [true, false] {
        let graph = parent(heed);
        let out = graph
            .invoke(
                ParentUpdate::default().foo("foo".to_string()),
                RunConfig::new().thread("1"),
            )
            .await
            .unwrap();
        assert_eq!(out.state.foo, "hi! foo", "heed: {heed}");
        let RunStatus::Interrupted { interrupts, next } = &out.status else {
            panic!("the parent must pause (heed: {heed}), got {:?}", out.status);
        };
        assert_eq!(interrupts[0].payload, "Provide baz value");
        assert!(
            interrupts[0].namespace.starts_with("node_2:"),
            "{interrupts:?}"
        );
        assert_eq!(next, &["node_2"]);
        let state = graph.get_state("1", None).await.unwrap();
        assert_eq!(
            (state.next.clone(), state.interrupts.len()),
            (vec!["node_2".to_string()], 1)
        );

        let out = graph
            .resume("1", Resume::value("baz").unwrap(), RunConfig::new())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Done, "heed: {heed}");
        assert_eq!(out.state.foo, "hi! foobaz");
    }
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Sum {
    a: i64,
    b: i64,
    result: i64,
}

/// LangGraph: test_pregel.py::test_multiple_subgraphs — a node that invokes the same graph
/// twice gets two children (each its own namespace), inside a checkpointed parent.
#[tokio::test]
async fn a_node_can_invoke_the_same_graph_twice() {
    let mut add = StateGraph::<Sum>::new();
    add.add_node("add", |s: Arc<Sum>, _c: Context| async move {
        Ok::<_, NodeError>(SumUpdate::default().result(s.a + s.b))
    });
    add.add_edge(START, "add").add_edge("add", END);
    let add = add.compile().unwrap();
    let mut g = StateGraph::<Sum>::new();
    g.add_node("call_same_subgraph", move |s: Arc<Sum>, _c: Context| {
        let add = add.clone();
        async move {
            let first = add
                .invoke(SumUpdate::default().a(s.a).b(s.b), RunConfig::new())
                .await
                .map_err(|e| NodeError::new(e.to_string()))?;
            let second = add
                .invoke(
                    SumUpdate::default().a(first.state.result).b(10),
                    RunConfig::new(),
                )
                .await
                .map_err(|e| NodeError::new(e.to_string()))?;
            assert_ne!(
                first.thread_id, second.thread_id,
                "two children, two namespaces"
            );
            Ok::<_, NodeError>(SumUpdate::default().result(second.state.result))
        }
    });
    g.add_edge(START, "call_same_subgraph")
        .add_edge("call_same_subgraph", END);
    let graph = g.compile().unwrap().with_checkpointer(store());
    let out = graph
        .invoke(SumUpdate::default().a(2).b(3), RunConfig::new().thread("1"))
        .await
        .unwrap();
    assert_eq!(out.state.result, 15);
}
