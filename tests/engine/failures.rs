//! Conflicting writes, recursion limit, timeouts, retries, panics: every failure names the node
//! (or field) and the step.

use super::{visit, Log, LogUpdate};
use stategraph::graph::RetryPolicy;
use stategraph::runtime::{Context, NodeError, NodeErrorKind, RunConfig, RunError};
use stategraph::state::MergeError;
use stategraph::{StateGraph, END, START};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn two_overwrite_writes_in_one_step_name_the_field_and_the_nodes() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("split", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    for name in ["left", "right"] {
        g.add_node(name, move |_s: Arc<Log>, _c: Context| async move {
            Ok(LogUpdate::default().last(name))
        });
        g.add_edge("split", name).add_edge(name, END);
    }
    g.add_edge(START, "split");
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    match &err {
        RunError::Merge {
            step,
            source: MergeError::ConcurrentWrites { field, nodes },
            ..
        } => {
            assert_eq!((*step, *field), (2, "last"));
            assert_eq!(nodes, &vec!["left".to_string(), "right".to_string()]);
        }
        other => panic!("expected a merge error, got {other:?}"),
    }
    assert!(
        err.to_string().contains("`last`") && err.to_string().contains("left, right"),
        "{err}"
    );
}

#[tokio::test]
async fn the_recursion_limit_names_the_limit_and_the_step_reached() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("spin", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default().total(1))
    });
    g.add_edge(START, "spin");
    g.add_conditional_edges("spin", |_s: &Log| "spin", ["spin", END]);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new().recursion_limit(7))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::RecursionLimit {
                limit: 7,
                step: 7,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("recursion limit of 7"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_node_past_its_timeout_fails_with_a_timeout_naming_node_and_step() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("slow", |_s: Arc<Log>, _c: Context| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(LogUpdate::default())
    })
    .timeout(Duration::from_secs(1));
    g.add_edge(START, "slow").add_edge("slow", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    match &err {
        RunError::NodeFailed {
            node, step, kind, ..
        } => {
            assert_eq!((node.as_str(), *step), ("slow", 1));
            assert!(matches!(kind, NodeErrorKind::Timeout(_)));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        err.to_string().contains("`slow`") && err.to_string().contains("timed out"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_with_backoff_until_success() {
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = attempts.clone();
    let mut g = StateGraph::<Log>::new();
    g.add_node("flaky", move |_s: Arc<Log>, ctx: Context| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            if ctx.attempt() < 3 {
                return Err(NodeError::transient("503 from upstream"));
            }
            Ok(visit("flaky"))
        }
    })
    .retry(RetryPolicy::new(5).initial_interval(Duration::from_millis(100)));
    g.add_edge(START, "flaky").add_edge("flaky", END);
    let started = tokio::time::Instant::now();
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["flaky"]);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    // Two backoffs of about 100 ms and 200 ms (with jitter in [0.5, 1.5)).
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test(start_paused = true)]
async fn errors_the_policy_does_not_retry_fail_at_once_with_their_attempt_count() {
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = attempts.clone();
    let mut g = StateGraph::<Log>::new();
    g.add_node("strict", move |_s: Arc<Log>, _c: Context| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            Err::<LogUpdate, _>(NodeError::new("bad request"))
        }
    })
    .retry(RetryPolicy::new(4));
    g.add_edge(START, "strict").add_edge("strict", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert!(
        matches!(err, RunError::NodeFailed { attempts: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_custom_retry_predicate_chooses_which_errors_retry_and_attempts_are_capped() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("always", |_s: Arc<Log>, _c: Context| async {
        Err::<LogUpdate, _>(NodeError::new("quota"))
    })
    .retry(
        RetryPolicy::new(3)
            .retry_on(|e| e.message().contains("quota"))
            .jitter(false),
    );
    g.add_edge(START, "always").add_edge("always", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::NodeFailed { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("after 3 attempts: quota"), "{err}");
}

#[test]
fn backoff_grows_exponentially_and_is_capped() {
    let p = RetryPolicy::new(10)
        .initial_interval(Duration::from_millis(100))
        .backoff_factor(2.0)
        .max_interval(Duration::from_millis(500))
        .jitter(false);
    let waits: Vec<u128> = (1..=5).map(|a| p.backoff(a).as_millis()).collect();
    assert_eq!(waits, vec![100, 200, 400, 500, 500]);
    let jittered = RetryPolicy::new(3).initial_interval(Duration::from_millis(100));
    for _ in 0..50 {
        let w = jittered.backoff(1).as_millis();
        assert!((50..150).contains(&w), "{w}");
    }
}

#[tokio::test]
async fn a_panicking_node_is_an_error_naming_it_not_a_crash() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("oops", |s: Arc<Log>, _c: Context| async move {
        let v: Vec<u8> = Vec::new();
        let _ = v[s.visits.len() + 3];
        Ok(LogUpdate::default())
    });
    g.add_edge(START, "oops").add_edge("oops", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    match &err {
        RunError::NodeFailed {
            node,
            kind,
            message,
            ..
        } => {
            assert_eq!(node, "oops");
            assert_eq!(kind, &NodeErrorKind::Panicked);
            assert!(message.contains("index out of bounds"), "{message}");
        }
        other => panic!("expected a node failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_parallel_failure_waits_for_siblings_and_reports_the_first_failed_task() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("split", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_node("ok", |_s: Arc<Log>, _c: Context| async { Ok(visit("ok")) });
    g.add_node("bad", |_s: Arc<Log>, _c: Context| async {
        Err::<LogUpdate, _>(NodeError::new("boom"))
    });
    g.add_edge(START, "split")
        .add_edge("split", "ok")
        .add_edge("split", "bad");
    g.add_edge("ok", END).add_edge("bad", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, step: 2, .. } if node == "bad"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_router_returning_an_undeclared_target_is_a_clear_run_time_error() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_node("b", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_edge(START, "a").add_edge("b", END);
    g.add_conditional_edges("a", |_s: &Log| "b", ["a", END]);
    let err = g.compile().unwrap_err();
    // `b` is unreachable as declared: compile already says so.
    assert!(err.to_string().contains("node `b` can never run"), "{err}");

    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_node("b", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("b", END);
    g.add_conditional_edges("a", |_s: &Log| "b", [END]);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::UndeclaredTarget { target, .. } if target == "b"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("the router after `a`") && text.contains("did not declare"),
        "{text}"
    );
}

#[tokio::test]
async fn a_command_to_an_undeclared_destination_is_refused() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_s: Arc<Log>, _c: Context| async {
        Ok(stategraph::Command::<Log>::empty().goto("b"))
    });
    g.add_node("b", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_edge(START, "a")
        .add_edge("a", END)
        .add_edge(START, "b")
        .add_edge("b", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("a command of node `a`"), "{err}");
}

/// A run cancelled while a subgraph runs ends cancelled, not with a failed node, whether the
/// subgraph's task runs alone in its step or beside a sibling: the child sees the same token
/// and may end first, and its end is the cancellation's.
#[tokio::test]
async fn a_run_cancelled_inside_a_subgraph_ends_cancelled_not_failed() {
    for with_sibling in [false, true] {
        let mut child = StateGraph::<Log>::new();
        child.add_node("slow", |_s: Arc<Log>, _c: Context| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, NodeError>(visit("slow"))
        });
        child.add_edge(START, "slow").add_edge("slow", END);
        let mut g = StateGraph::<Log>::new();
        g.add_node("child", child.compile().unwrap());
        g.add_edge(START, "child").add_edge("child", END);
        if with_sibling {
            g.add_node("sibling", |_s: Arc<Log>, _c: Context| async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, NodeError>(visit("sibling"))
            });
            g.add_edge(START, "sibling").add_edge("sibling", END);
        }
        let graph = g
            .compile()
            .unwrap()
            .with_checkpointer(Arc::new(stategraph::checkpoint::MemoryCheckpointer::new()));
        let token = tokio_util::sync::CancellationToken::new();
        let cancel = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });
        let config = RunConfig::new().thread("t").cancel_on(token);
        let result = tokio::time::timeout(
            Duration::from_secs(10),
            graph.invoke(LogUpdate::default(), config),
        )
        .await
        .expect("the cancellation ends the run at once");
        assert!(
            matches!(result, Err(RunError::Cancelled { .. })),
            "with a sibling: {with_sibling}: {result:?}"
        );
    }
}
