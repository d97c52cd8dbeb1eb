//! An error handler is a checkpointed step like any other: a real process is killed with
//! SIGKILL while the handler runs, and the next process resumes the thread in the handler; the
//! node that failed does not run again.
//!
//! Children are this test binary run again with the hidden `handler_child` test selected (as
//! `crash.rs` does). They append `exec NODE PID` to a log (fsync per line) before each node's
//! body, and `done PID` when the run ends; the first child's handler waits to be killed.

use serde::{Deserialize, Serialize};
use stategraph::graph::{NodeFailure, RetryPolicy, StateGraph};
use stategraph::runtime::{Context, NodeError, RunConfig, RunStatus};
use stategraph::{CompiledGraph, State, END, START};
use stategraph_sled::SledCheckpointer;
#[path = "support/killed_child.rs"]
mod killed_child;
use killed_child::{
    child_runtime, kill_when_logged, log_line, log_lines, open_retrying, run_or_resume, spawn_self,
    wait_ok,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const CHILD_ENV: &str = "STATEGRAPH_HANDLER_CHILD";
const THREAD: &str = "handled";

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Job {
    failure: Option<NodeFailure>,
    #[state(append)]
    done: Vec<String>,
}

/// `prep -> fetch -> report`; `fetch` always fails (twice, with its retry) and is handled by
/// `recover`, which waits to be killed while `hang` exists.
fn graph(log: PathBuf, hang: PathBuf) -> StateGraph<Job> {
    let pid = std::process::id();
    let mut g = StateGraph::<Job>::named("handled");
    let l = log.clone();
    g.add_node("prep", move |_s: Arc<Job>, _c: Context| {
        log_line(&l, &format!("exec prep {pid}"));
        async { Ok(JobUpdate::default().done(vec!["prep".into()])) }
    });
    let l = log.clone();
    g.add_node("fetch", move |_s: Arc<Job>, _c: Context| {
        log_line(&l, &format!("exec fetch {pid}"));
        async { Err::<JobUpdate, _>(NodeError::new("upstream is down")) }
    })
    .retry(
        RetryPolicy::new(2)
            .initial_interval(Duration::from_millis(1))
            .retry_on(|_| true),
    )
    .on_error("recover", "failure");
    let l = log.clone();
    g.add_node("report", move |_s: Arc<Job>, _c: Context| {
        log_line(&l, &format!("exec report {pid}"));
        async { Ok(JobUpdate::default().done(vec!["report".into()])) }
    });
    g.add_node("recover", move |s: Arc<Job>, _c: Context| {
        log_line(&log, &format!("exec recover {pid}"));
        let hang = hang.clone();
        async move {
            if hang.exists() {
                // Killed here by the parent.
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            let failed = s
                .failure
                .as_ref()
                .map(|f| f.node.clone())
                .unwrap_or_default();
            Ok(JobUpdate::default().done(vec![format!("recovered {failed}")]))
        }
    });
    g.add_edge(START, "prep")
        .add_edge("prep", "fetch")
        .add_edge("fetch", "report")
        .add_edge("report", END)
        .add_edge("recover", END);
    g
}

fn open_store(store: &Path) -> SledCheckpointer {
    open_retrying(|| SledCheckpointer::open(store))
}

fn compiled(dir: &Path) -> CompiledGraph<Job> {
    graph(dir.join("log"), dir.join("hang"))
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(open_store(&dir.join("store"))))
}

#[test]
#[ignore = "a child process of the handler crash test, started by it"]
fn handler_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    child_runtime().block_on(async {
        let graph = compiled(&dir);
        // A killed run's claim on the thread lapses after this.
        let config = || {
            let mut config = RunConfig::new().thread(THREAD);
            config.lease_ttl = Duration::from_secs(2);
            config
        };
        let out = run_or_resume(&graph, THREAD, JobUpdate::default, config).await;
        assert_eq!(out.status, RunStatus::Done);
        log_line(&dir.join("log"), &format!("done {}", std::process::id()));
    });
}

#[test]
fn a_run_killed_in_its_error_handler_resumes_in_the_handler() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("hang"), b"").unwrap();

    let log = dir.join("log");
    let mut first = spawn_self("handler_child", CHILD_ENV, dir);
    let first_pid = first.id();
    kill_when_logged(&mut first, &log, &format!("exec recover {first_pid}"));

    std::fs::remove_file(dir.join("hang")).unwrap();
    let second = spawn_self("handler_child", CHILD_ENV, dir);
    let second_pid = second.id();
    wait_ok(second);

    let lines = log_lines(&log);
    assert_eq!(
        lines,
        vec![
            format!("exec prep {first_pid}"),
            format!("exec fetch {first_pid}"),
            format!("exec fetch {first_pid}"),
            format!("exec recover {first_pid}"),
            format!("exec recover {second_pid}"),
            format!("done {second_pid}"),
        ],
        "the resume ran the handler again, and neither the failed node nor its edge"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let state = runtime.block_on(async {
        let graph = compiled(dir);
        graph.get_state(THREAD, None).await.unwrap()
    });
    assert_eq!(state.values.done, vec!["prep", "recovered fetch"]);
    let failure = state.values.failure.unwrap();
    assert_eq!(
        (
            failure.node.as_str(),
            failure.attempts,
            failure.message.as_str()
        ),
        ("fetch", 2, "upstream is down")
    );
    assert!(state.next.is_empty());
}
