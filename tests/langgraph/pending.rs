//! A step that stopped part-way: its finished tasks' results show as applied.

use crate::{input, store, Foo, FooUpdate};
use stategraph::graph::RetryPolicy;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError, RunStatus};
use stategraph::{StateGraph, END, START};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// LangGraph: test_pregel.py::test_pending_writes_resume — `one` succeeds and `two` fails in
/// the same step: the thread's state shows `one`'s write applied with only `two` next; the
/// checkpoint read by id shows neither; a resume runs `two` alone.
#[tokio::test]
async fn a_failed_step_shows_its_finished_siblings_writes_and_only_the_failed_task_next() {
    let ones = Arc::new(AtomicU32::new(0));
    let twos = Arc::new(AtomicU32::new(0));
    let broken = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut g = StateGraph::<Foo>::new();
    let calls = ones.clone();
    g.add_node("one", move |_s: Arc<Foo>, _c: Context| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, NodeError>(FooUpdate::default().log(vec!["one".to_string()])) }
    });
    let (calls, fail) = (twos.clone(), broken.clone());
    g.add_node("two", move |_s: Arc<Foo>, _c: Context| {
        calls.fetch_add(1, Ordering::SeqCst);
        let fail = fail.load(Ordering::SeqCst);
        async move {
            if fail {
                return Err(NodeError::transient("I'm not good"));
            }
            Ok(FooUpdate::default().log(vec!["two".to_string()]))
        }
    })
    .retry(
        RetryPolicy::new(2)
            .initial_interval(Duration::ZERO)
            .jitter(false),
    );
    g.add_edge(START, "one")
        .add_edge(START, "two")
        .add_edge("one", END)
        .add_edge("two", END);
    let graph = g.compile().unwrap().with_checkpointer(store());

    let err = graph
        .invoke(input("v"), RunConfig::new().thread("1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, .. } if node == "two"),
        "{err}"
    );
    assert_eq!(
        (ones.load(Ordering::SeqCst), twos.load(Ordering::SeqCst)),
        (1, 2)
    );

    let state = graph.get_state("1", None).await.unwrap();
    assert_eq!(state.values.log, ["one"]);
    assert_eq!(state.next, ["two"]);
    assert_eq!(state.completed, ["one"]);
    assert_eq!(state.errors[0].node, "two");
    // By id, the checkpoint as stored: no pending write applied.
    let stored = graph
        .get_state("1", Some(state.checkpoint_id))
        .await
        .unwrap();
    assert!(stored.values.log.is_empty());
    assert_eq!(stored.next, ["one", "two"]);

    // Failing again: `one` is not called again, no checkpoint is added.
    graph
        .resume("1", Resume::Continue, RunConfig::new())
        .await
        .unwrap_err();
    assert_eq!(
        (ones.load(Ordering::SeqCst), twos.load(Ordering::SeqCst)),
        (1, 4)
    );
    let again = graph.get_state("1", None).await.unwrap();
    assert_eq!(again.checkpoint_id, state.checkpoint_id);

    broken.store(false, Ordering::SeqCst);
    let done = graph
        .resume("1", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.state.log, ["one", "two"]);
    assert_eq!(ones.load(Ordering::SeqCst), 1);
}

/// LangGraph: test_pregel_async.py::test_node_not_cancelled_on_other_node_interrupted — one
/// task pauses while its sibling finishes: the run's result (and the thread's state) has the
/// sibling's write applied, again after a resume without an answer, and the answer completes
/// the step without running the sibling again.
#[tokio::test]
async fn a_paused_step_shows_its_finished_siblings_writes_in_the_result() {
    let awhiles = Arc::new(AtomicU32::new(0));
    let mut g = StateGraph::<Foo>::new();
    let calls = awhiles.clone();
    g.add_node("agent", move |_s: Arc<Foo>, _c: Context| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, NodeError>(FooUpdate::default().log(vec![" again".to_string()])) }
    });
    g.add_node("bad", |_s: Arc<Foo>, ctx: Context| async move {
        let answer: String = ctx.interrupt("I am bad").await?;
        Ok::<_, NodeError>(FooUpdate::default().log(vec![answer]))
    });
    g.add_edge(START, "agent")
        .add_edge(START, "bad")
        .add_edge("agent", END)
        .add_edge("bad", END);
    let graph = g.compile().unwrap().with_checkpointer(store());

    let out = graph
        .invoke(input("world"), RunConfig::new().thread("1"))
        .await
        .unwrap();
    assert_eq!(out.state.log, [" again"]);
    match &out.status {
        RunStatus::Interrupted { interrupts, next } => {
            assert_eq!(interrupts[0].payload, "I am bad");
            assert_eq!(next, &["bad"]);
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    let state = graph.get_state("1", None).await.unwrap();
    assert_eq!(
        (state.values.log.clone(), state.next.clone()),
        (vec![" again".to_string()], vec!["bad".to_string()])
    );

    let out = graph
        .resume("1", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert!(out.is_interrupted());
    assert_eq!(out.state.log, [" again"]);
    assert_eq!(awhiles.load(Ordering::SeqCst), 1);

    let out = graph
        .resume("1", Resume::value(" okay").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.log, [" again", " okay"]);
    assert_eq!(awhiles.load(Ordering::SeqCst), 1);
}
