//! A resume that carries an update and a goto (LangGraph's `Command(resume=..., update=...,
//! goto=...)`): `ResumeCommand`.

use crate::{input, store, suffix, Foo, FooUpdate};
use stategraph::runtime::{
    Context, NodeError, Resume, ResumeCommand, RunConfig, RunError, RunStatus,
};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

fn log(name: &str) -> FooUpdate {
    FooUpdate::default().log(vec![name.to_string()])
}

/// LangGraph: test_pregel_async.py::test_interrupt_multiple — a node asks twice; the first
/// answer comes with an update, which is merged before the node runs again (and stays merged
/// when the second answer resumes the same step).
#[tokio::test]
async fn a_resume_with_an_update_merges_it_before_the_step() {
    let mut g = StateGraph::<Foo>::new();
    g.add_node("node", |s: Arc<Foo>, ctx: Context| async move {
        let first: String = ctx.interrupt(serde_json::json!({"value": 1})).await?;
        let second: String = ctx.interrupt(serde_json::json!({"value": 2})).await?;
        Ok::<_, NodeError>(log(&format!("{first} {second} (saw {})", s.foo)))
    });
    g.add_edge(START, "node").add_edge("node", END);
    let graph = g.compile().unwrap().with_checkpointer(store());
    let out = graph
        .invoke(input("DE"), RunConfig::new().thread("1"))
        .await
        .unwrap();
    assert!(out.is_interrupted());

    let command = ResumeCommand::new(Resume::value("answer 1").unwrap())
        .update(FooUpdate::default().foo("foofoo".to_string()));
    let out = graph
        .resume_command("1", command, RunConfig::new())
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("the second question pauses again: {:?}", out.status);
    };
    assert_eq!(interrupts[0].payload, serde_json::json!({"value": 2}));
    assert_eq!(out.state.foo, "foofoo");
    assert_eq!(
        graph.get_state("1", None).await.unwrap().values.foo,
        "foofoo"
    );

    let out = graph
        .resume("1", Resume::value("answer 2").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.log, ["answer 1 answer 2 (saw foofoo)"]);
    assert_eq!(out.state.foo, "foofoo");
}

/// LangGraph: test_pregel.py::test_command_goto_with_static_breakpoints — paused before
/// node1, a resume with `goto=["node2"]` runs node2 in the same step as node1; node1's edge
/// then runs node2 again.
#[tokio::test]
async fn a_resume_with_a_goto_adds_the_task_to_the_step() {
    let mut g = StateGraph::<Foo>::new();
    suffix(&mut g, "node1");
    g.add_node("node2", |_s: Arc<Foo>, _c: Context| async {
        Ok::<_, NodeError>(log("node2"))
    });
    g.add_edge(START, "node1")
        .add_edge("node1", "node2")
        .add_edge("node2", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(store())
        .interrupt_before(["node1"])
        .unwrap();
    graph
        .invoke(input("abc"), RunConfig::new().thread("1"))
        .await
        .unwrap();
    let out = graph
        .resume_command(
            "1",
            ResumeCommand::new(Resume::Continue).goto(["node2"].to_vec()),
            RunConfig::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.log, ["node1", "node2", "node2"]);

    // A goto to a node the graph lacks is refused before anything runs.
    let err = graph
        .resume_command(
            "1",
            ResumeCommand::new(Resume::Continue).goto("nope"),
            RunConfig::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::Graph(_)), "{err}");
}
