//! Stopping runs on time and on request, through the public API (issue 34, items 3 and 4): a
//! run timeout and a drain stop a run at a step boundary with its step saved, and a resume
//! finishes it running no node twice; a node's idle timeout cancels a silent attempt, which its
//! retry policy sees, while heartbeats (its own, its events, its streamed text, work awaited
//! under `heartbeat_during`, its subgraph's steps) keep a slow node alive.
//!
//! Time-bound tests run on tokio's paused clock: a sleep takes no wall time, so what they
//! assert is the outcome and the saved steps, never how fast the machine is.

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::{CompiledGraph, RetryPolicy, StateGraph};
use stategraph::runtime::{
    Context, Durability, Event, HistoryQuery, NodeError, NodeErrorKind, Resume, RunConfig,
    RunControl, RunError, RunStatus, StopReason, TOKEN_EVENT,
};
use stategraph::{State, END, START};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Trail {
    #[state(append)]
    visits: Vec<String>,
}

/// Every node run, in order, across runs of a test: what proves nothing ran twice.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<Vec<String>>>);

impl Runs {
    fn note(&self, node: &str) {
        self.0.lock().unwrap().push(node.to_string());
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn visited(node: &str) -> TrailUpdate {
    TrailUpdate::default().visits(vec![node.to_string()])
}

/// A chain `a -> b -> c -> d`, each node sleeping `each` first.
fn slow_chain(runs: &Runs, each: Duration) -> CompiledGraph<Trail> {
    let mut g = StateGraph::<Trail>::new();
    let names = ["a", "b", "c", "d"];
    for name in names {
        let runs = runs.clone();
        g.add_node(name, move |_s: Arc<Trail>, _c: Context| {
            let runs = runs.clone();
            async move {
                tokio::time::sleep(each).await;
                runs.note(name);
                Ok::<_, NodeError>(visited(name))
            }
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", "d")
        .add_edge("d", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

async fn newest_step(graph: &CompiledGraph<Trail>, thread: &str) -> (u64, Vec<String>) {
    let state = graph.get_state(thread, None).await.unwrap();
    (state.step, state.next)
}

#[tokio::test(start_paused = true)]
async fn a_run_timeout_stops_after_the_step_that_passes_it_and_a_resume_finishes_the_run() {
    let runs = Runs::default();
    let graph = slow_chain(&runs, Duration::from_millis(200));
    let config = RunConfig::new()
        .thread("timed")
        .run_timeout(Duration::from_millis(300));
    let err = graph
        .invoke(TrailUpdate::default(), config)
        .await
        .unwrap_err();
    // Step 1 ends at 200 ms, inside the limit; step 2 passes it, finishes and is saved.
    let RunError::Stopped {
        step,
        reason: StopReason::RunTimeout { limit, elapsed },
        ref next,
        saved: true,
        ..
    } = err
    else {
        panic!("expected a run stopped by its timeout, got {err:?}");
    };
    assert_eq!((step, next.clone()), (2, vec!["c".to_string()]));
    assert_eq!(limit, Duration::from_millis(300));
    assert!(elapsed >= limit, "{elapsed:?}");
    let message = err.to_string();
    assert!(
        message.contains("run timeout of 300ms") && message.contains("resume the thread"),
        "{message}"
    );
    assert_eq!(
        newest_step(&graph, "timed").await,
        (2, vec!["c".to_string()])
    );
    assert_eq!(
        runs.all(),
        ["a", "b"],
        "the step in flight finished, no later one ran"
    );

    let out = graph
        .resume("timed", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.visits, ["a", "b", "c", "d"]);
    assert_eq!(runs.all(), ["a", "b", "c", "d"], "no node ran twice");
}

#[tokio::test(start_paused = true)]
async fn a_run_that_ends_within_its_timeout_is_done() {
    let runs = Runs::default();
    let graph = slow_chain(&runs, Duration::from_millis(10));
    let config = RunConfig::new().run_timeout(Duration::from_secs(60));
    let out = graph.invoke(TrailUpdate::default(), config).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.step, 4);
}

#[tokio::test(start_paused = true)]
async fn without_a_checkpointer_a_stopped_run_says_nothing_was_kept() {
    let mut g = StateGraph::<Trail>::new();
    g.add_node("slow", |_s: Arc<Trail>, _c: Context| async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok::<_, NodeError>(visited("slow"))
    });
    g.add_node("after", |_s: Arc<Trail>, _c: Context| async {
        Ok::<_, NodeError>(visited("after"))
    });
    g.add_edge(START, "slow")
        .add_edge("slow", "after")
        .add_edge("after", END);
    let config = RunConfig::new().run_timeout(Duration::from_secs(1));
    let err = g
        .compile()
        .unwrap()
        .invoke(TrailUpdate::default(), config)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Stopped {
                saved: false,
                step: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nothing of it was kept"), "{err}");
}

/// A graph of one node, `fetch`, whose first `silent_attempts` attempts hang without a sign
/// of life; later ones answer at once.
fn flaky_fetch(silent_attempts: u32, retry: Option<RetryPolicy>) -> CompiledGraph<Trail> {
    let mut g = StateGraph::<Trail>::new();
    let mut spec = g.add_node("fetch", move |_s: Arc<Trail>, ctx: Context| async move {
        if ctx.attempt() <= silent_attempts {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok::<_, NodeError>(visited(&format!("fetch#{}", ctx.attempt())))
    });
    spec.idle_timeout(Duration::from_secs(1));
    if let Some(policy) = retry {
        spec.retry(policy);
    }
    g.add_edge(START, "fetch").add_edge("fetch", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

#[tokio::test(start_paused = true)]
async fn an_idle_timeout_cancels_a_silent_attempt_and_the_retry_policy_runs_it_again() {
    let retry = RetryPolicy::new(2)
        .initial_interval(Duration::from_millis(10))
        .jitter(false);
    let graph = flaky_fetch(1, Some(retry));
    let mut stream = graph.stream(TrailUpdate::default(), RunConfig::new().thread("flaky"));
    let mut failures = Vec::new();
    while let Some(event) = stream.next().await {
        if let Event::NodeFailed {
            node,
            attempt,
            error,
            will_retry,
            ..
        } = event
        {
            failures.push((node, attempt, error, will_retry));
        }
    }
    let out = stream.outcome().await.unwrap();
    assert_eq!(
        out.state.visits,
        ["fetch#2"],
        "the second attempt ran and answered"
    );
    let [(node, attempt, error, will_retry)] = &failures[..] else {
        panic!("expected one failed attempt, got {failures:?}");
    };
    assert_eq!((node.as_str(), *attempt, *will_retry), ("fetch", 1, true));
    assert!(
        error.contains("node `fetch`")
            && error.contains("no sign of life for 1s")
            && error.contains("idle timeout of 1s"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_silent_past_its_idle_timeout_with_no_retries_left_fails_the_run_resumably() {
    let graph = flaky_fetch(1, None);
    let config = RunConfig::new().thread("silent");
    let err = graph
        .invoke(TrailUpdate::default(), config)
        .await
        .unwrap_err();
    let RunError::NodeFailed {
        node,
        attempts,
        kind,
        message,
        ..
    } = &err
    else {
        panic!("expected the node to fail, got {err:?}");
    };
    assert_eq!((node.as_str(), *attempts), ("fetch", 1));
    assert_eq!(*kind, NodeErrorKind::Timeout(Duration::from_secs(1)));
    assert!(message.contains("idle timeout of 1s"), "{message}");
    // The thread stands where it failed, with the error kept: a resume runs `fetch` again.
    let state = graph.get_state("silent", None).await.unwrap();
    assert_eq!(state.next, ["fetch"]);
    assert_eq!(state.errors.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_events_streamed_text_and_awaited_work_keep_slow_nodes_alive() {
    let idle = Duration::from_secs(1);
    let step = Duration::from_millis(400);
    let mut g = StateGraph::<Trail>::new();
    // Each node works 4 s in all, far past its idle timeout, never silent for more than 400 ms.
    g.add_node("beats", move |_s: Arc<Trail>, ctx: Context| async move {
        for _ in 0..10 {
            tokio::time::sleep(step).await;
            ctx.heartbeat();
        }
        Ok::<_, NodeError>(visited("beats"))
    })
    .idle_timeout(idle);
    g.add_node("emits", move |_s: Arc<Trail>, ctx: Context| async move {
        for i in 0..10 {
            tokio::time::sleep(step).await;
            ctx.emit("progress", format!("page {i}"));
        }
        Ok::<_, NodeError>(visited("emits"))
    })
    .idle_timeout(idle);
    // What a model client does with `request.stream`: each streamed piece goes to the sink.
    g.add_node("streams", move |_s: Arc<Trail>, ctx: Context| async move {
        let sink = ctx
            .text_sink(TOKEN_EVENT)
            .ok_or_else(|| NodeError::new("a node with an idle timeout gets a sink"))?;
        for piece in [
            "The", " answer", " is", " forty", "-two", ".", " Done", ".", "", "",
        ] {
            tokio::time::sleep(step).await;
            sink(piece);
        }
        Ok::<_, NodeError>(visited("streams"))
    })
    .idle_timeout(idle);
    // What the prebuilt tool node does around a tool call.
    g.add_node("awaits", move |_s: Arc<Trail>, ctx: Context| async move {
        ctx.heartbeat_during(tokio::time::sleep(Duration::from_secs(4)))
            .await;
        Ok::<_, NodeError>(visited("awaits"))
    })
    .idle_timeout(idle);
    for node in ["beats", "emits", "streams", "awaits"] {
        g.add_edge(START, node).add_edge(node, END);
    }
    let graph = g.compile().unwrap();
    let out = graph
        .invoke(TrailUpdate::default(), RunConfig::new())
        .await
        .expect("no node was silent for 1 s");
    assert_eq!(out.state.visits, ["beats", "emits", "streams", "awaits"]);
}

#[tokio::test(start_paused = true)]
async fn the_steps_of_a_subgraph_keep_the_node_that_runs_it_alive() {
    let mut child = StateGraph::<Trail>::new();
    for name in ["search", "read", "write"] {
        child.add_node(name, move |_s: Arc<Trail>, _c: Context| async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            Ok::<_, NodeError>(visited(name))
        });
    }
    child
        .add_edge(START, "search")
        .add_edge("search", "read")
        .add_edge("read", "write")
        .add_edge("write", END);
    let child = child.compile().unwrap();
    let mut g = StateGraph::<Trail>::new();
    // 1.8 s in all, never more than 600 ms without a child's task starting.
    g.add_node("research", child)
        .idle_timeout(Duration::from_secs(1));
    g.add_edge(START, "research").add_edge("research", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = graph
        .invoke(TrailUpdate::default(), RunConfig::new().thread("parent"))
        .await
        .expect("the subgraph's steps are signs of life");
    assert_eq!(out.state.visits, ["search", "read", "write"]);
}

/// `a -> (b1, b2) -> c`: `b1` says it started, then waits until the test lets it go.
fn gated_fan_out(runs: &Runs, started: Arc<Notify>, gate: Arc<Notify>) -> CompiledGraph<Trail> {
    let mut g = StateGraph::<Trail>::new();
    for name in ["a", "b2", "c"] {
        let runs = runs.clone();
        g.add_node(name, move |_s: Arc<Trail>, _c: Context| {
            let runs = runs.clone();
            async move {
                runs.note(name);
                Ok::<_, NodeError>(visited(name))
            }
        });
    }
    let b1_runs = runs.clone();
    g.add_node("b1", move |_s: Arc<Trail>, _c: Context| {
        let (runs, started, gate) = (b1_runs.clone(), started.clone(), gate.clone());
        async move {
            started.notify_one();
            gate.notified().await;
            runs.note("b1");
            Ok::<_, NodeError>(visited("b1"))
        }
    });
    g.add_edge(START, "a")
        .add_edge("a", "b1")
        .add_edge("a", "b2")
        .add_edge("b1", "c")
        .add_edge("b2", "c")
        .add_edge("c", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

#[tokio::test]
async fn a_drain_mid_step_saves_that_step_starts_no_other_and_a_resume_runs_nothing_twice() {
    let runs = Runs::default();
    let (started, gate) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let graph = gated_fan_out(&runs, started.clone(), gate.clone());
    let control = RunControl::new();
    let config = RunConfig::new().thread("drained").control(&control);
    let running = tokio::spawn({
        let graph = graph.clone();
        async move { graph.invoke(TrailUpdate::default(), config).await }
    });
    started.notified().await;
    control.request_drain();
    gate.notify_one();
    let err = running.await.unwrap().unwrap_err();
    let RunError::Stopped {
        step,
        reason: StopReason::Drained,
        next,
        saved: true,
        ..
    } = &err
    else {
        panic!("expected a drained run, got {err:?}");
    };
    assert_eq!((*step, next.clone()), (2, vec!["c".to_string()]));
    assert!(err.to_string().contains("was drained"), "{err}");
    let mut ran = runs.all();
    ran.sort();
    assert_eq!(
        ran,
        ["a", "b1", "b2"],
        "both tasks of the step in flight finished"
    );
    assert_eq!(
        newest_step(&graph, "drained").await,
        (2, vec!["c".to_string()])
    );
    let history = graph
        .history("drained", HistoryQuery::default())
        .await
        .unwrap();
    assert_eq!(history.first().map(|h| h.step), Some(2));

    let out = graph
        .resume("drained", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    let mut ran = runs.all();
    ran.sort();
    assert_eq!(ran, ["a", "b1", "b2", "c"], "no node ran twice");
}

#[tokio::test]
async fn a_drain_asked_before_the_run_keeps_its_input_and_runs_no_step() {
    let runs = Runs::default();
    let graph = slow_chain(&runs, Duration::ZERO);
    let control = RunControl::new();
    control.request_drain();
    let config = RunConfig::new().thread("early").control(&control);
    let err = graph
        .invoke(TrailUpdate::default().visits(vec!["input".into()]), config)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Stopped { reason: StopReason::Drained, next, .. } if next == &["a"]),
        "{err:?}"
    );
    assert!(runs.all().is_empty());
    let out = graph
        .resume("early", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, ["input", "a", "b", "c", "d"]);
}

#[tokio::test]
async fn a_stream_hands_out_its_run_control() {
    let runs = Runs::default();
    let (started, gate) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let graph = gated_fan_out(&runs, started.clone(), gate.clone());
    let mut stream = graph.stream(TrailUpdate::default(), RunConfig::new().thread("streamed"));
    let control = stream.control();
    tokio::spawn(async move {
        started.notified().await;
        control.request_drain();
        gate.notify_one();
    });
    while stream.next().await.is_some() {}
    let err = stream.outcome().await.unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Stopped {
                reason: StopReason::Drained,
                step: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!runs.all().contains(&"c".to_string()));
}

#[tokio::test(start_paused = true)]
async fn in_exit_durability_a_stopped_run_writes_the_step_it_stopped_after() {
    let runs = Runs::default();
    let graph = slow_chain(&runs, Duration::from_millis(200));
    let config = RunConfig::new()
        .thread("at-exit")
        .durability(Durability::Exit)
        .run_timeout(Duration::from_millis(300));
    let err = graph
        .invoke(TrailUpdate::default(), config)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Stopped {
                step: 2,
                saved: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        newest_step(&graph, "at-exit").await,
        (2, vec!["c".to_string()])
    );
    let out = graph
        .resume("at-exit", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, ["a", "b", "c", "d"]);
    assert_eq!(runs.all(), ["a", "b", "c", "d"], "no node ran twice");
}
