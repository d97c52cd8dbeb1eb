//! `graph run brief`: a function graph (the functional API) run by the real `graph` binary like
//! any other graph: it finishes, pauses for its question and resumes with the answer, and a run
//! killed with SIGKILL in its last task resumes with its finished tasks replayed, not run; the
//! `custom` stream shows each task (`task` events).

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;
use std::io::{BufRead, BufReader};

/// The `task` events of a `--stream custom` stdout, as `name status`.
fn task_events(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "custom" && e["kind"] == "task")
        .map(|e| task_line(&e))
        .collect()
}

fn task_line(event: &Value) -> String {
    let p = &event["payload"];
    format!(
        "{} {}",
        p["name"].as_str().unwrap_or("?"),
        p["status"].as_str().unwrap_or("?")
    )
}

#[test]
fn a_function_graph_runs_to_its_output() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "brief",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=0",
        ])
        .expect(0);
    assert!(out.stdout.contains("# sled"), "{out}");
    assert!(out.stdout.contains("- sled saves every step."), "{out}");
    assert!(out.stdout.contains("- sled asks before it acts."), "{out}");
}

#[test]
fn a_function_graph_pauses_for_its_question_and_resumes_replaying_its_tasks() {
    let db = Db::new();
    let paused = db
        .graph(&["run", "brief", "--input", "sled", "--set", "step_ms=0"])
        .expect(3);
    paused.stderr_has(&["publish this brief?"]);
    let thread = paused.thread();
    let done = db
        .graph(&["resume", &thread, "--resume", "yes", "--stream", "custom"])
        .expect(0);
    assert_eq!(
        task_events(&done.stdout),
        [
            "fetch replayed",
            "draft replayed",
            "draft replayed",
            "draft replayed",
            "publish started",
            "publish done"
        ],
        "{done}"
    );
    assert!(done.stdout.contains("# sled"), "{done}");
}

#[test]
fn a_function_graph_killed_in_its_last_task_runs_only_that_task_again() {
    let db = Db::new();
    let mut run = db
        .graph(&[
            "run",
            "brief",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=1500",
            "--stream",
            "custom",
        ])
        .spawn();
    let thread = run.thread();
    let mut seen = Vec::new();
    for line in BufReader::new(run.take_stdout()).lines() {
        let line = line.expect("the run's stdout");
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if event["event"] == "custom" && event["kind"] == "task" {
            seen.push(task_line(&event));
            if seen.last().map(String::as_str) == Some("publish started") {
                break;
            }
        }
    }
    assert_eq!(seen.last().map(String::as_str), Some("publish started"));
    run.signal(libc::SIGKILL);
    run.finish();

    let done = db
        .graph(&["resume", &thread, "--stream", "custom"])
        .expect(0);
    assert_eq!(
        task_events(&done.stdout),
        [
            "fetch replayed",
            "draft replayed",
            "draft replayed",
            "draft replayed",
            "publish started",
            "publish done"
        ],
        "{done}"
    );
    assert!(
        done.stdout.contains("- sled resumes after a crash."),
        "{done}"
    );
}
