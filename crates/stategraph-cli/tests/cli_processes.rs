//! Real processes: Ctrl+C, SIGTERM, SIGHUP and kill -9 in the middle of a run, then resume; a
//! signal after the run ended; a second terminal reading and running while a run goes; two runs
//! of one thread; stdout and stderr into a pipe whose reader goes away.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Output};
use serde_json::{json, Value};

/// Each node waits this long, so there is time to act mid-run even on a loaded machine.
const SLOW: &str = "step_ms=1000";

/// How many times each node completed on the thread, from the state's log.
fn log_of(db: &Db, thread: &str) -> Vec<String> {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    serde_json::from_value(state["values"]["log"].clone()).unwrap()
}

fn assert_each_node_once(db: &Db, thread: &str) {
    assert_eq!(
        log_of(db, thread),
        ["outline", "draft 0", "draft 1", "draft 2", "review", "publish"]
    );
}

fn started(out: &Output, node: &str) -> bool {
    out.stderr.contains(&format!(": {node} started"))
        || out.stderr.contains(&format!(": {node} #0 started"))
}

#[test]
fn ctrl_c_stops_with_130_and_resume_finishes_without_rerunning_finished_nodes() {
    let db = Db::new();
    let mut run = db
        .graph(&["run", "pipeline", "--input", "sled", "--yes", "--set", SLOW])
        .spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");
    run.signal(libc::SIGINT);
    let stopped = run.finish();
    assert_eq!(stopped.code, Some(130), "{stopped}");
    stopped.stderr_has(&["stopping", &format!("graph resume {thread}")]);

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "stopped");
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["draft", "draft", "draft"]));

    let resumed = db.graph(&["resume", &thread]).expect(0);
    assert!(
        !started(&resumed, "outline"),
        "outline had finished and must not run again\n{resumed}"
    );
    assert!(started(&resumed, "draft"), "{resumed}");
    assert_each_node_once(&db, &thread);
}

/// Each step of the pipeline takes this long: a signal sent during the drafts comes long before
/// they could finish, so a run that did not stop at once would have saved them.
const VERY_SLOW: &str = "step_ms=5000";

/// Sends `signal` (one that abandons the step in flight: SIGINT, SIGHUP) during the drafts
/// (step 2) of a run, which must stop with `code` saying how
/// to continue, keep the outline's checkpoint (the drafts abandoned, not saved), be listed as
/// stopped, and resume to the end without running the outline again. Returns what it printed.
fn stopped_by_signal_then_resumed(signal: i32, code: i32, extra: &[&str]) -> Output {
    let db = Db::new();
    let mut args = vec![
        "run", "pipeline", "--input", "sled", "--yes", "--set", VERY_SLOW,
    ];
    args.extend_from_slice(extra);
    let mut run = db.graph(&args).spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");
    run.signal(signal);
    let stopped = run.finish();
    assert_eq!(
        stopped.code,
        Some(code),
        "handled, not killed by the signal\n{stopped}"
    );
    stopped.stderr_has(&[
        "the step in flight is abandoned, the last checkpoint is kept",
        &format!("stopped at step 1 of thread {thread}"),
        &format!("graph resume {thread}"),
    ]);

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "stopped");
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["draft", "draft", "draft"]));

    let resumed = db
        .graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
    assert!(
        !started(&resumed, "outline"),
        "outline had finished and must not run again\n{resumed}"
    );
    assert!(started(&resumed, "draft"), "{resumed}");
    assert_each_node_once(&db, &thread);
    stopped
}

/// SIGTERM drains (the library's `RunControl::request_drain`): sent during the drafts (step 2),
/// it lets them finish and saves them, starts no new step, ends with 143 saying so, and a
/// resume goes on with the review, running no node twice.
#[test]
fn sigterm_drains_with_143_and_resume_finishes_without_rerunning_saved_steps() {
    let db = Db::new();
    let mut run = db
        .graph(&["run", "pipeline", "--input", "sled", "--yes", "--set", SLOW])
        .spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");
    run.signal(libc::SIGTERM);
    let stopped = run.finish();
    assert_eq!(stopped.code, Some(143), "handled, not killed\n{stopped}");
    stopped.stderr_has(&[
        "draining on SIGTERM: the step in flight finishes and is saved, no new step starts",
        &format!("drained on SIGTERM: step 2 of thread {thread} finished and is saved"),
        &format!("graph resume {thread}"),
    ]);
    assert!(
        !started(&stopped, "review"),
        "no new step started\n{stopped}"
    );
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["review"]), "{stopped}");
    assert_eq!(
        log_of(&db, &thread),
        ["outline", "draft 0", "draft 1", "draft 2"]
    );

    let resumed = db
        .graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
    assert!(
        !started(&resumed, "draft"),
        "the drafts were saved\n{resumed}"
    );
    assert!(started(&resumed, "review"), "{resumed}");
    assert_each_node_once(&db, &thread);
}

#[test]
fn sighup_stops_with_129_and_says_so_in_json() {
    let stopped = stopped_by_signal_then_resumed(libc::SIGHUP, 129, &["--json"]);
    let doc = stopped.json();
    assert_eq!(doc["stopped_by"], "SIGHUP", "{stopped}");
    assert_eq!(doc["status"], "stopped", "{stopped}");
}

#[test]
fn sigterm_in_async_durability_keeps_what_was_queued() {
    let db = Db::new();
    let mut run = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            SLOW,
            "--durability",
            "async",
        ])
        .spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");
    run.signal(libc::SIGTERM);
    let stopped = run.finish();
    assert_eq!(stopped.code, Some(143), "{stopped}");
    // The drain saved the drafts' step: async durability flushed it before the command ended.
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["review"]), "{stopped}");
}

#[test]
fn a_run_started_ignoring_sighup_outlives_it_as_under_nohup() {
    let db = Db::new();
    let mut run = db
        .run_pipeline(1000, &["--yes"])
        .ignoring(libc::SIGHUP)
        .spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");
    run.signal(libc::SIGHUP);
    let out = run.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_each_node_once(&db, &thread);
}

#[test]
fn a_second_ctrl_c_quits_at_once() {
    let db = Db::new();
    let mut run = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=5000",
        ])
        .spawn();
    let thread = run.thread();
    run.wait_for("outline started");
    run.signal(libc::SIGINT);
    run.wait_for("stopping");
    run.signal(libc::SIGINT);
    let out = run.finish();
    assert_eq!(out.code, Some(130), "{out}");
    // Nothing saved is lost: the input checkpoint is there and the thread resumes.
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["outline"]));
}

/// Sends `signal` to a run that has ended, while the command finishes up: its report waits to
/// write an answer larger than a pipe holds into a stdout the test does not read yet. The
/// signal is heard at once (before: tokio, which had listened during the run, swallowed it and
/// the command exited 0), the command finishes (the whole answer is written, the thread is done
/// and let go), then exits with the signal's code.
fn a_signal_after_the_run_ended(signal: i32, name: &str, code: i32) {
    let db = Db::new();
    let input = db.path().join("input.json");
    let topic = "sled ".repeat(8000);
    std::fs::write(&input, json!({ "topic": topic }).to_string()).unwrap();
    let input = input.display().to_string();
    let mut run = db
        .graph(&[
            "run",
            "pipeline",
            "--input-file",
            &input,
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .spawn();
    let stdout = run.take_stdout();
    let thread = run.thread();
    run.wait_for(&format!("done: thread {thread} finished after 4 steps"));
    run.signal(signal);
    run.wait_for(&format!(
        "{name}: the run had already ended, its checkpoints are kept; finishing up, then exiting with {code}"
    ));
    let reader = std::thread::spawn(move || {
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut { stdout }, &mut answer).unwrap();
        answer
    });
    let out = run.finish();
    let answer = reader.join().unwrap();
    assert_eq!(out.code, Some(code), "{out}");
    assert!(
        answer.starts_with("# A short guide to sled sled"),
        "{}\n{out}",
        &answer[..answer.len().min(100)]
    );
    assert!(
        answer.ends_with("\n"),
        "the whole answer was written\n{out}"
    );
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{out}");
    assert_each_node_once(&db, &thread);
}

#[test]
fn sigterm_after_the_run_ended_is_heard_the_report_finishes_and_exit_is_143() {
    a_signal_after_the_run_ended(libc::SIGTERM, "SIGTERM", 143);
}

#[test]
fn ctrl_c_after_the_run_ended_is_heard_the_report_finishes_and_exit_is_130() {
    a_signal_after_the_run_ended(libc::SIGINT, "Ctrl+C", 130);
}

#[test]
fn kill_9_then_resume_finishes_without_rerunning_checkpointed_nodes() {
    let db = Db::new();
    let mut run = db
        .graph(&["run", "pipeline", "--input", "sled", "--yes", "--set", SLOW])
        .spawn();
    let thread = run.thread();
    run.wait_for("publish started");
    run.signal(libc::SIGKILL);
    let killed = run.finish();
    assert_eq!(killed.code, None, "killed by a signal\n{killed}");

    // The index still says running; the lister sees nobody holds it.
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "stopped");
    let resumed = db.graph(&["resume", &thread]).expect(0);
    for node in ["outline", "draft", "review"] {
        assert!(
            !started(&resumed, node),
            "{node} had a checkpoint and must not run again\n{resumed}"
        );
    }
    assert!(started(&resumed, "publish"), "{resumed}");
    assert!(
        resumed.stdout.starts_with("# A short guide to sled"),
        "{resumed}"
    );
    assert_each_node_once(&db, &thread);
}

#[test]
fn a_second_terminal_lists_reads_and_runs_other_threads_during_a_run() {
    let db = Db::new();
    let mut run = db
        .graph(&["run", "pipeline", "--input", "long", "--yes", "--set", SLOW])
        .spawn();
    let thread = run.thread();
    run.wait_for("step 2: draft #0 started");

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], thread.as_str());
    assert_eq!(listed[0]["status"], "running");
    let table = db.graph(&["threads"]).expect(0);
    assert!(table.stdout.contains("running"), "{table}");

    // Served by the process that holds the thread's store.
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["status"], "running");
    assert_eq!(state["values"]["topic"], "long");
    assert_eq!(state["next"], json!(["draft", "draft", "draft"]));
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert!(history.as_array().unwrap().len() >= 2);

    // Another thread runs to the end meanwhile.
    let other = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "short",
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0);
    assert!(other.stdout.contains("guide to short"));
    assert!(run.is_running(), "the first run is still going");

    let done = run.finish();
    assert_eq!(done.code, Some(0), "{done}");
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    let statuses: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["status"])
        .collect();
    assert_eq!(statuses, [&json!("done"), &json!("done")]);
}

#[test]
fn a_running_thread_is_busy_for_other_writers() {
    let db = Db::new();
    let mut run = db
        .graph(&["run", "pipeline", "--input", "sled", "--yes", "--set", SLOW])
        .spawn();
    let thread = run.thread();
    run.wait_for("outline started");
    let busy = |args: &[&str]| {
        db.graph(args)
            .expect(1)
            .stderr_has(&["is busy"])
            .stderr
            .clone()
    };
    busy(&["run", "pipeline", "--thread", &thread, "--input", "again"]);
    busy(&["resume", &thread]);
    busy(&["rerun", &thread, "--from", "outline"]);
    busy(&["update", &thread, "--set-json", r#"{"title": "x"}"#]);
    busy(&["delete", &thread]);
    let pruned = db.graph(&["prune", "--json"]).expect(0).json();
    assert_eq!(pruned["threads"][0]["skipped"], "running");

    let done = run.finish();
    assert_eq!(done.code, Some(0), "{done}");
    assert_each_node_once(&db, &thread);
}

/// `COMMAND 2>&1 | head -2`: what was read holds no panic, and the command did not die of one
/// (exit 101), whether or not it had more to say when the pipe closed.
fn piped_into_head_2(db: &Db, args: &[&str]) -> Option<i32> {
    let (lines, code) = db.graph(args).piped_into_head(2);
    assert_eq!(lines.len(), 2, "graph {}: {lines:?}", args.join(" "));
    assert!(
        !lines.iter().any(|l| l.contains("panicked")),
        "graph {}: {lines:?}",
        args.join(" ")
    );
    assert_ne!(code, Some(101), "graph {} panicked", args.join(" "));
    code
}

#[test]
fn a_run_piped_into_head_finishes_and_so_do_threads_and_history() {
    let db = Db::new();
    // Plain progress lines on a closed pipe: the run goes on to the end, its thread complete;
    // its answer then finds stdout closed: 141, as `ls | head` under `set -o pipefail` (was 0).
    let run = [
        "run",
        "pipeline",
        "--input",
        "sled",
        "--yes",
        "--set",
        "step_ms=20",
    ];
    assert_eq!(piped_into_head_2(&db, &run), Some(141));
    let threads = db.thread_ids();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_each_node_once(&db, &threads[0]);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done");

    // Listings longer than two lines: whether a write found the reader gone depends on how
    // fast it read (a pipe holds what was written before it closed), as for any Unix tool.
    for listing in [vec!["threads"], vec!["history", &threads[0]]] {
        let code = piped_into_head_2(&db, &listing);
        assert!(matches!(code, Some(0 | 141)), "{listing:?}: {code:?}");
    }
}

/// `graph run ... --stream updates | head -1`: the run stops once nobody reads its events, as
/// soon as the reader is gone (during the drafts, which would take 5 s more to send their
/// updates), keeping its last checkpoint, and ends with 141 (before: it ran on to the end,
/// unseen, the pipeline waiting on it, and exited 0). The thread resumes where it stopped.
#[test]
fn a_stream_whose_reader_went_away_stops_the_run_with_141_and_it_resumes() {
    let db = Db::new();
    let (lines, stopped) = db
        .graph(&[
            "run", "pipeline", "--input", "sled", "--yes", "--set", VERY_SLOW, "--stream",
            "updates",
        ])
        .stdout_into_head(1);
    assert_eq!(lines.len(), 1, "{stopped}");
    assert!(lines[0].contains(r#""node":"outline""#), "{stopped}");
    assert_eq!(stopped.code, Some(141), "{stopped}");
    let thread = stopped.thread();
    stopped.stderr_has(&[
        "stopping: stdout was closed (its reader went away): the step in flight is abandoned, the last checkpoint is kept",
        &format!("of thread {thread} (stdout closed); the last checkpoint is kept"),
        &format!("graph resume {thread}"),
    ]);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "stopped", "{stopped}");
    stopped.stderr_has(&[&format!("stopped at step 1 of thread {thread}")]);
    assert_eq!(
        log_of(&db, &thread),
        ["outline"],
        "the drafts were abandoned\n{stopped}"
    );

    let resumed = db
        .graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
    assert!(
        !started(&resumed, "outline"),
        "outline had finished and must not run again\n{resumed}"
    );
    assert_each_node_once(&db, &thread);
}
