//! Behaviours of LangGraph's own test suite (libs/langgraph/tests) that apply to this engine,
//! one test per behaviour, each naming the LangGraph test it comes from. The facts carry over,
//! not the code: our graphs are typed, our updates are deltas.

mod bulk_update;
mod command;
mod invoke_in_node;
mod pending;
mod stream;
mod time_travel;
mod update_state;

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError, RunStatus};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Foo {
    foo: String,
    #[state(append)]
    log: Vec<String>,
}

fn store() -> Arc<MemoryCheckpointer> {
    Arc::new(MemoryCheckpointer::new())
}

/// A node that appends `|name` to `foo` and logs its name.
fn suffix(g: &mut StateGraph<Foo>, name: &'static str) {
    g.add_node(name, move |s: Arc<Foo>, _c: Context| async move {
        Ok::<_, NodeError>(
            FooUpdate::default()
                .foo(format!("{}|{name}", s.foo))
                .log(vec![name.to_string()]),
        )
    });
}

/// `START -> node1 -> node2 -> END`.
fn two_nodes() -> StateGraph<Foo> {
    let mut g = StateGraph::<Foo>::new();
    suffix(&mut g, "node1");
    suffix(&mut g, "node2");
    g.add_edge(START, "node1")
        .add_edge("node1", "node2")
        .add_edge("node2", END);
    g
}

fn input(text: &str) -> FooUpdate {
    FooUpdate::default().foo(text.to_string())
}

/// LangGraph: test_pregel.py::test_command_with_static_breakpoints — resuming with a value at
/// a static breakpoint continues the run (the value has no interrupt to answer).
#[tokio::test]
async fn a_resume_value_at_a_static_breakpoint_continues() {
    let graph = two_nodes()
        .compile()
        .unwrap()
        .with_checkpointer(store())
        .interrupt_before(["node1"])
        .unwrap();
    let out = graph
        .invoke(input("abc"), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    let out = graph
        .resume("t", Resume::value("node1").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.foo, "abc|node1|node2");
}

/// LangGraph: test_pregel_async.py::test_dynamic_interrupt — `update_state(None, as_node=END)`
/// clears the pending interrupt and the next tasks; the state is kept.
#[tokio::test]
async fn update_state_as_end_clears_the_next_tasks_and_the_pause() {
    let mut g = StateGraph::<Foo>::new();
    g.add_node("tool_two", |_s: Arc<Foo>, ctx: Context| async move {
        let _: String = ctx.interrupt("Just because...").await?;
        Ok::<_, NodeError>(FooUpdate::default().log(vec!["tool_two".to_string()]))
    });
    g.add_edge(START, "tool_two").add_edge("tool_two", END);
    let graph = g.compile().unwrap().with_checkpointer(store());
    let out = graph
        .invoke(input("value"), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    let before = graph.get_state("t", None).await.unwrap();
    assert_eq!((before.next.len(), before.interrupts.len()), (1, 1));

    graph
        .update_state("t", FooUpdate::default(), Some(END))
        .await
        .unwrap();
    let after = graph.get_state("t", None).await.unwrap();
    assert!(after.next.is_empty() && after.interrupts.is_empty());
    assert_eq!(after.values.foo, "value");
    assert_eq!(after.step, before.step + 1);
    // Nothing is left: a resume ends at once, and a value has nothing to answer.
    let done = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert!(done.state.log.is_empty(), "tool_two never ran");
}

/// LangGraph: test_pregel.py::test_state_graph_w_config_inherited_state_keys — conditional
/// edges with a path map (`{"continue": "tools", "exit": END}`): the router returns a key.
#[tokio::test]
async fn a_path_map_turns_router_keys_into_targets() {
    let mut g = StateGraph::<Foo>::new();
    suffix(&mut g, "agent");
    suffix(&mut g, "tools");
    g.add_edge(START, "agent").add_edge("tools", "agent");
    g.add_conditional_edges_map(
        "agent",
        |s: &Foo| if s.log.len() < 3 { "continue" } else { "exit" },
        [("continue", "tools"), ("exit", END)],
    );
    let out = g
        .compile()
        .unwrap()
        .invoke(input("x"), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.log, ["agent", "tools", "agent"]);

    // A key the map lacks fails as an undeclared target, naming the key.
    let mut g = StateGraph::<Foo>::new();
    suffix(&mut g, "agent");
    g.add_edge(START, "agent");
    g.add_conditional_edges_map("agent", |_s: &Foo| "elsewhere", [("exit", END)]);
    let err = g
        .compile()
        .unwrap()
        .invoke(input("x"), RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::UndeclaredTarget { target, .. } if target == "elsewhere"),
        "{err}"
    );
}

/// A child over `Foo` that pauses in its node `ask` and appends the answer.
fn asking_child() -> CompiledGraph<Foo> {
    let mut g = StateGraph::<Foo>::new();
    suffix(&mut g, "prep");
    g.add_node("ask", |_s: Arc<Foo>, ctx: Context| async move {
        let answer: String = ctx.interrupt("Just because...").await?;
        Ok::<_, NodeError>(FooUpdate::default().log(vec![answer]))
    });
    g.add_edge(START, "prep")
        .add_edge("prep", "ask")
        .add_edge("ask", END);
    g.compile().unwrap()
}

/// LangGraph: test_pregel_async.py::test_dynamic_interrupt_subgraph — an interrupt inside a
/// subgraph pauses the parent; the parent's state lists it (with the subgraph's namespace)
/// and a resume answers it inside the subgraph.
#[tokio::test]
async fn an_interrupt_in_a_subgraph_pauses_the_parent_and_resumes_inside_it() {
    let mut g = StateGraph::<Foo>::new();
    g.add_node("tool_two", asking_child());
    g.add_edge(START, "tool_two").add_edge("tool_two", END);
    let graph = g.compile().unwrap().with_checkpointer(store());
    let out = graph
        .invoke(input("value"), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.next, ["tool_two"]);
    assert_eq!(state.interrupts[0].node, "ask");
    assert!(state.interrupts[0].namespace.starts_with("tool_two:"));
    let out = graph
        .resume("t", Resume::value("answered").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.log, ["prep", "answered"]);
    assert_eq!(out.state.foo, "value|prep");
}
