//! Real processes: `graph run --timeout` and `graph resume --timeout` stop a run at the first
//! step boundary past the time given (that step saved, exit 124, the `graph resume` line that
//! continues it), and a resume finishes the run running no node twice. (SIGTERM, which drains
//! a run the same way, is in `cli_processes.rs`.)

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Output};
use serde_json::Value;

/// How many times each node completed on the thread, from the state's log.
fn log_of(db: &Db, thread: &str) -> Vec<String> {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    serde_json::from_value(state["values"]["log"].clone()).unwrap()
}

const EVERY_NODE: [&str; 6] = [
    "outline", "draft 0", "draft 1", "draft 2", "review", "publish",
];

/// The step the thread stands at, and what runs next, as `graph state` says.
fn standing(db: &Db, thread: &str) -> (u64, Vec<String>) {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    let step = state["step"].as_u64().expect("a step");
    let next = serde_json::from_value(state["next"].clone()).unwrap();
    (step, next)
}

fn started(out: &Output, node: &str) -> bool {
    out.stderr.contains(&format!(": {node} started"))
        || out.stderr.contains(&format!(": {node} #0 started"))
}

#[test]
fn a_run_past_its_timeout_stops_with_124_at_a_step_boundary_and_resume_finishes_it() {
    let db = Db::new();
    // Four steps of 800 ms against a second: the run stops after the step that passes it, not
    // in the middle of one, whichever step that is on a loaded machine.
    let stopped = db.run_pipeline(800, &["--yes", "--timeout", "1s"]).output();
    assert_eq!(stopped.code, Some(124), "{stopped}");
    let thread = stopped.thread();
    let (step, next) = standing(&db, &thread);
    assert!(
        (1..4).contains(&step),
        "some steps saved, not all: {step}\n{stopped}"
    );
    assert!(!next.is_empty(), "{stopped}");
    stopped.stderr_has(&[
        "stopped: the run passed its --timeout of 1.0s",
        &format!("step {step} of thread {thread} is saved, no new step started"),
        &format!("graph resume {thread}"),
    ]);
    let saved = log_of(&db, &thread);
    assert_eq!(saved, EVERY_NODE[..saved.len()], "whole steps only");

    let resumed = db
        .graph(&["resume", &thread, "--set", "step_ms=1", "--timeout", "10m"])
        .expect(0);
    assert!(!started(&resumed, "outline"), "{resumed}");
    assert_eq!(log_of(&db, &thread), EVERY_NODE, "no node ran twice");
}

#[test]
fn a_resume_keeps_to_its_own_timeout_and_json_says_how_the_run_stopped() {
    let db = Db::new();
    // Each step (800 ms) passes the timeout (500 ms): the run and the resume both stop after
    // one step each.
    let first = db
        .run_pipeline(800, &["--yes", "--timeout", "500ms"])
        .output();
    assert_eq!(first.code, Some(124), "{first}");
    let thread = first.thread();
    assert_eq!(standing(&db, &thread).0, 1, "{first}");
    let stopped = db
        .graph(&[
            "resume",
            &thread,
            "--set",
            "step_ms=800",
            "--timeout",
            "500ms",
            "--json",
        ])
        .output();
    assert_eq!(stopped.code, Some(124), "{stopped}");
    let doc: Value = stopped.json();
    assert_eq!(doc["stopped_by"], "timeout", "{stopped}");
    assert_eq!(
        doc["continue_with"]
            .as_str()
            .map(|c| c.contains(&format!("graph resume {thread}"))),
        Some(true),
        "{stopped}"
    );
    let (step, next) = standing(&db, &thread);
    assert_eq!(
        (step, doc["next"].clone()),
        (2, serde_json::json!(next)),
        "{stopped}"
    );

    db.graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
    assert_eq!(log_of(&db, &thread), EVERY_NODE, "no node ran twice");
}

#[test]
fn a_timeout_that_is_no_duration_is_refused_before_anything_runs() {
    let db = Db::new();
    let out = db.run_pipeline(1, &["--yes", "--timeout", "soon"]).output();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("`soon` is not a duration"), "{out}");
    assert!(db.thread_ids().is_empty(), "nothing was made");
}
