//! Error handlers through the public API: a node that fails after its retries writes its
//! failure into the declared field and the run goes to its handler, whose routing decides what
//! follows; the failed node's own edges are not followed. `on_error_crash.rs` kills a real
//! process in the handler.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::{GraphError, NodeFailure, RetryPolicy, StateGraph};
use stategraph::runtime::{Context, HistoryQuery, NodeError, RunConfig, RunError, RunStatus};
use stategraph::{Command, State, END, START};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Job {
    failure: Option<NodeFailure>,
    #[state(append)]
    log: Vec<String>,
    verdict: String,
}

fn quick_retries(n: u32) -> RetryPolicy {
    RetryPolicy::new(n)
        .initial_interval(Duration::from_millis(1))
        .jitter(false)
        .retry_on(|_| true)
}

#[tokio::test]
async fn a_failure_after_retries_goes_to_the_handler_with_its_error() {
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let mut g = StateGraph::<Job>::new();
    g.add_node("fetch", move |_s: Arc<Job>, _c: Context| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Err::<JobUpdate, _>(NodeError::new("connection refused"))
        }
    })
    .retry(quick_retries(3))
    .on_error("recover", "failure");
    g.add_node("summarize", |_s: Arc<Job>, _c: Context| async {
        Ok(JobUpdate::default().log(vec!["summarized".into()]))
    });
    g.add_node("recover", |s: Arc<Job>, _c: Context| async move {
        let f = s.failure.clone().unwrap_or_default();
        Ok(JobUpdate::default()
            .log(vec![format!("recovered {} after {}", f.node, f.attempts)])
            .verdict(format!("gave up: {}", f.message)))
    });
    g.add_edge(START, "fetch")
        .add_edge("fetch", "summarize")
        .add_edge("summarize", END)
        .add_edge("recover", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));

    let out = graph
        .invoke(JobUpdate::default(), RunConfig::new().thread("job-1"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(attempts.load(Ordering::SeqCst), 3, "retries came first");
    assert_eq!(
        out.state.failure,
        Some(NodeFailure {
            node: "fetch".into(),
            message: "connection refused".into(),
            attempts: 3,
            step: 1,
        })
    );
    assert_eq!(
        out.state.log,
        vec!["recovered fetch after 3"],
        "the failed node's edge to `summarize` was not followed"
    );
    assert_eq!(out.state.verdict, "gave up: connection refused");

    // The handling is a step of the thread's history like any other.
    let history = graph
        .history("job-1", HistoryQuery::default())
        .await
        .unwrap();
    let steps: Vec<(u64, Vec<String>, Vec<String>)> = history
        .iter()
        .rev()
        .map(|e| (e.step, e.metadata.writers.clone(), e.next.clone()))
        .collect();
    assert_eq!(
        steps,
        vec![
            (0, vec!["__input__".to_string()], vec!["fetch".to_string()]),
            (1, vec!["fetch".to_string()], vec!["recover".to_string()]),
            (2, vec!["recover".to_string()], vec![]),
        ]
    );
}

#[tokio::test]
async fn the_handler_may_send_the_run_back_to_try_again() {
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let mut g = StateGraph::<Job>::new();
    // Fails twice, then works: the handler routes back to it.
    g.add_node("flaky", move |_s: Arc<Job>, _c: Context| {
        let counter = counter.clone();
        async move {
            if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                return Err(NodeError::new("busy"));
            }
            Ok(JobUpdate::default().log(vec!["flaky done".into()]))
        }
    })
    .on_error("again", "failure");
    g.add_node("again", |s: Arc<Job>, _c: Context| async move {
        let tries = s.log.len();
        let goto = if tries < 5 { "flaky" } else { END };
        Ok(
            Command::from_update(JobUpdate::default().log(vec![format!("retry {tries}")]))
                .goto(goto),
        )
    })
    .destinations(["flaky", END]);
    g.add_edge(START, "flaky").add_edge("flaky", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(JobUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.log,
        vec!["retry 0", "retry 1", "flaky done"],
        "two failures handled, then the node's own edge"
    );
    assert_eq!(out.state.failure.map(|f| f.attempts), Some(1));
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Fan {
    #[state(append)]
    failures: Vec<NodeFailure>,
    #[state(append)]
    log: Vec<String>,
}

#[tokio::test]
async fn a_handled_failure_merges_with_its_siblings_in_task_order() {
    let mut g = StateGraph::<Fan>::new();
    g.add_node("split", |_s: Arc<Fan>, _c: Context| async {
        Ok(FanUpdate::default())
    });
    g.add_node("a", |_s: Arc<Fan>, _c: Context| async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(FanUpdate::default().log(vec!["a".into()]))
    });
    g.add_node("b", |_s: Arc<Fan>, _c: Context| async {
        Err::<FanUpdate, _>(NodeError::new("b broke"))
    })
    .on_error("fix", "failures");
    g.add_node("c", |_s: Arc<Fan>, _c: Context| async {
        Ok(FanUpdate::default().log(vec!["c".into()]))
    });
    g.add_node("fix", |s: Arc<Fan>, _c: Context| async move {
        Ok(FanUpdate::default().log(vec![format!("fixed {}", s.failures.len())]))
    });
    g.add_node("after", |_s: Arc<Fan>, _c: Context| async {
        Ok(FanUpdate::default().log(vec!["after".into()]))
    });
    g.add_edge(START, "split");
    for n in ["a", "b", "c"] {
        g.add_edge("split", n).add_edge(n, "after");
    }
    g.add_edge("fix", END).add_edge("after", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(FanUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.failures.len(),
        1,
        "an append field collects failures"
    );
    assert_eq!(out.state.failures[0].node, "b");
    // `fix` and `after` run in the same step, in declaration order.
    assert_eq!(out.state.log, vec!["a", "c", "fixed 1", "after"]);
}

#[tokio::test]
async fn without_a_handler_the_run_still_fails() {
    let mut g = StateGraph::<Job>::new();
    g.add_node("fetch", |_s: Arc<Job>, _c: Context| async {
        Err::<JobUpdate, _>(NodeError::new("down"))
    });
    g.add_edge(START, "fetch").add_edge("fetch", END);
    let err = g
        .compile()
        .unwrap()
        .invoke(JobUpdate::default(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::NodeFailed { .. }), "{err}");
}

#[test]
fn a_field_that_cannot_hold_a_failure_is_refused_at_compile() {
    let mut g = StateGraph::<Job>::new();
    g.add_node("fetch", |_s: Arc<Job>, _c: Context| async {
        Ok(JobUpdate::default())
    })
    .on_error("recover", "verdict");
    g.add_node("recover", |_s: Arc<Job>, _c: Context| async {
        Ok(JobUpdate::default())
    });
    g.add_node("other", |_s: Arc<Job>, _c: Context| async {
        Ok(JobUpdate::default())
    })
    .on_error("recover", "nowhere");
    g.add_edge(START, "fetch")
        .add_edge("fetch", "other")
        .add_edge("other", END)
        .add_edge("recover", END);
    let Err(GraphError::Invalid(problems)) = g.compile() else {
        panic!("compiled a graph whose failures have nowhere to go");
    };
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("node `fetch`") && problems[0].contains("`verdict`"));
    assert!(problems[1].contains("`nowhere`"), "{problems:?}");

    let mut g = StateGraph::<Job>::new();
    g.add_node("fetch", |_s: Arc<Job>, _c: Context| async {
        Ok(JobUpdate::default())
    })
    .on_error("missing", "failure");
    g.add_edge(START, "fetch").add_edge("fetch", END);
    let Err(GraphError::Invalid(problems)) = g.compile() else {
        panic!("compiled a graph whose handler does not exist");
    };
    assert!(
        problems.iter().any(|p| p.contains("`missing`")),
        "{problems:?}"
    );
}
