//! The run queue's commands against a real Postgres: `graph submit`, `graph worker`, `graph
//! runs`, `graph cancel`, and a paused thread resumed through the queue. Workers are real
//! `graph worker` processes running the keyless pipeline.

mod queue_support;

use queue_support::pg_cluster::cluster;
use queue_support::*;
use serde_json::Value;
use stategraph::checkpoint::Checkpointer;
use stategraph_postgres::PostgresCheckpointer;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn the_queue_commands_refuse_an_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["submit", "pipeline", "--input", "x"],
        &["worker"],
        &["runs"],
        &["cancel", "--thread", "t"],
    ];
    for args in commands {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_graph"))
            .args(args)
            .args(["--db", store])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("the run queue needs Postgres: pass --db postgres://"),
            "{args:?}: {stderr}"
        );
    }
}

fn started(at: &str, worker: &str, step: u64) -> Execution {
    Execution {
        at: at.to_string(),
        worker: worker.to_string(),
        run: "r".to_string(),
        thread: "t".to_string(),
        step,
        node: "tick".to_string(),
        task: 0,
    }
}

/// The check the fault test relies on tells a step in flight run again from a saved one.
#[test]
fn the_execution_check_tells_a_step_in_flight_from_a_saved_step() {
    // w1 was stopped in step 2; w2 ran it again: allowed.
    let in_flight = [
        started("2026-01-01T00:00:01Z", "w1", 1),
        started("2026-01-01T00:00:02Z", "w1", 2),
        started("2026-01-01T00:00:05Z", "w2", 2),
        started("2026-01-01T00:00:06Z", "w2", 3),
    ];
    assert_eq!(check_executions(&in_flight), 1);
    // w1 had gone on to step 3 (so step 2 was saved) when w2 ran step 2 again.
    let saved = [
        started("2026-01-01T00:00:02Z", "w1", 2),
        started("2026-01-01T00:00:03Z", "w1", 3),
        started("2026-01-01T00:00:05Z", "w2", 2),
    ];
    let caught = std::panic::catch_unwind(|| check_executions(&saved));
    assert!(caught.is_err(), "a saved step run again went unnoticed");
}

fn run_of(runs: &[Value], id: &str) -> Value {
    runs.iter()
        .find(|r| r["run_id"] == id)
        .unwrap_or_else(|| panic!("no run {id} in {runs:#?}"))
        .clone()
}

fn status(graph: &Graph, run: &str) -> String {
    run_of(&graph.runs(), run)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

fn submit(graph: &Graph, args: &[&str]) -> String {
    let mut all = vec!["submit"];
    all.extend_from_slice(args);
    graph.ok(&all).trim().to_string()
}

#[test]
fn runs_are_submitted_worked_listed_cancelled_resumed_and_drained() {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let graph = Graph::new(db.url(), dir.path());

    // Queued before any worker: one to pause at its review, one cancelled before it runs.
    let a = submit(
        &graph,
        &[
            "pipeline",
            "--input",
            "durable agents",
            "--thread",
            "a",
            "--set",
            "step_ms=10",
        ],
    );
    let b = submit(
        &graph,
        &["pipeline", "--input", "never", "--thread", "b", "--yes"],
    );
    let out = graph.run(&["cancel", &b]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled: it will not run"));
    let f = submit(
        &graph,
        &["pipeline", "--input", "never either", "--thread", "f"],
    );
    let out = graph.run(&["cancel", "--thread", "f"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = graph.runs();
    assert_eq!(run_of(&runs, &f)["status"], "cancelled");
    assert_eq!(run_of(&runs, &a)["status"], "queued");
    assert_eq!(run_of(&runs, &b)["status"], "cancelled");
    // The origin is written at submit, as `graph run` writes it.
    let store = tokio::runtime::Runtime::new().unwrap();
    let origin = store.block_on(async {
        let pg = PostgresCheckpointer::connect(db.url()).await.unwrap();
        pg.get_journal("a", "graph/origin").await.unwrap().unwrap()
    });
    assert_eq!(origin["graph"], "pipeline");
    assert_eq!(origin["overrides"], serde_json::json!(["step_ms=10"]));

    let mut worker = graph.worker("w1", &["--concurrency", "2", "--lease", "2"]);
    wait_until(WAIT, "run a pauses at its review", || {
        status(&graph, &a) == "paused"
    });
    // The answer goes through the queue: a new run of the thread, which `graph resume` queues
    // for a thread the queue serves.
    let out = graph.run(&["resume", "a", "--resume", "yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("its resume is queued"));
    let resume = String::from_utf8(out.stdout).unwrap().trim().to_string();
    wait_until(WAIT, "a's resume is done", || {
        status(&graph, &resume) == "done"
    });
    let watched = graph.run(&["runs", "--watch", "--thread", "a"]);
    assert!(watched.status.success());
    let table = String::from_utf8_lossy(&watched.stdout);
    assert!(
        table.contains("paused") && table.contains("done"),
        "{table}"
    );
    assert!(String::from_utf8_lossy(&watched.stderr).contains("every listed run has ended"));
    assert!(
        !worker
            .executions()
            .iter()
            .any(|e| e.thread == "b" || e.thread == "f"),
        "a run cancelled before its claim ran"
    );

    // A running run is cancelled at its next step boundary: heard within a heartbeat (under a
    // second), so during its first step; that step is saved, the review and publishing never
    // begin (the drafts' tasks may, the engine's known gap, stategraph-worker's README).
    let c = submit(
        &graph,
        &[
            "pipeline",
            "--input",
            "slow",
            "--thread",
            "c",
            "--yes",
            "--set",
            "step_ms=1500",
        ],
    );
    wait_until(WAIT, "run c starts", || {
        worker.executions().iter().any(|e| e.thread == "c")
    });
    let out = graph.run(&["cancel", &c]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(WAIT, "run c is cancelled", || {
        status(&graph, &c) == "cancelled"
    });
    assert!(
        !worker
            .executions()
            .iter()
            .any(|e| e.thread == "c" && (e.node == "publish" || e.node == "review")),
        "the cancelled run went on to its end"
    );
    let out = graph.run(&["cancel", "--thread", "c"]);
    assert_eq!(out.status.code(), Some(1), "nothing left to cancel");

    // Reject on a busy thread.
    let d = submit(
        &graph,
        &[
            "pipeline",
            "--input",
            "busy",
            "--thread",
            "d",
            "--yes",
            "--set",
            "step_ms=300",
        ],
    );
    let out = graph.run(&[
        "submit",
        "pipeline",
        "--input",
        "again",
        "--thread",
        "d",
        "--multitask",
        "reject",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already has run"));
    wait_until(WAIT, "run d is done", || status(&graph, &d) == "done");

    // SIGTERM drains: the step in flight is saved, the run goes back to the queue, exit 143.
    let e = submit(
        &graph,
        &[
            "pipeline",
            "--input",
            "drained",
            "--thread",
            "e",
            "--yes",
            "--set",
            "step_ms=500",
        ],
    );
    wait_until(WAIT, "run e starts", || {
        worker.executions().iter().any(|x| x.thread == "e")
    });
    worker.signal(libc::SIGTERM);
    let code = worker.wait(Duration::from_secs(20));
    assert_eq!(code.code(), Some(143), "{}", worker.log());
    assert!(
        worker.log().contains("given back to the queue"),
        "{}",
        worker.log()
    );
    assert_eq!(status(&graph, &e), "queued");
    let mut next = graph.worker("w2", &["--lease", "2"]);
    wait_until(WAIT, "run e is done", || status(&graph, &e) == "done");
    // The drain finished the step in flight, saved it and began no other: the next worker ran
    // no task the first had begun.
    let of_e: Vec<Execution> = (worker.executions().into_iter())
        .chain(next.executions())
        .filter(|x| x.thread == "e")
        .collect();
    let again = check_executions(&of_e);
    assert_eq!(again, 0, "a task ran again after the drain: {of_e:#?}");
    next.signal(libc::SIGINT);
    assert_eq!(next.wait(Duration::from_secs(20)).code(), Some(130));
}

/// `graph worker` without `-v` shows its operator what needs them: a run taken over from a
/// worker that died, a run that failed, and one line per run claimed and ended; not a line per
/// node.
#[test]
fn a_worker_at_its_default_level_tells_of_takeovers_and_failures() {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let graph = Graph::new(db.url(), dir.path());
    let slow = submit(
        &graph,
        &[
            "pipeline",
            "--input",
            "taken over",
            "--thread",
            "t",
            "--yes",
            "--set",
            "step_ms=800",
        ],
    );
    let mut first = graph.worker("dies", &["--lease", "1"]);
    wait_until(WAIT, "the first worker begins the run", || {
        first.executions().iter().any(|e| e.thread == "t")
    });
    first.kill();
    // A run no worker can build: the graph is not this binary's (submitted by a program that
    // knows other graphs).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let queue = runtime
        .block_on(stategraph_postgres::queue::RunQueue::connect(db.url()))
        .unwrap();
    let unknown = stategraph_postgres::queue::Submission::input("no-such-graph", Value::Null);
    let unknown = runtime.block_on(queue.submit(unknown)).unwrap().to_string();

    let mut operator = graph.worker_by_default("watched", &["--lease", "1"]);
    wait_until(WAIT, "the run is taken over and done", || {
        status(&graph, &slow) == "done"
    });
    wait_until(WAIT, "the unknown graph's run failed", || {
        status(&graph, &unknown) == "failed"
    });
    operator.signal(libc::SIGTERM);
    assert_eq!(operator.wait(WAIT).code(), Some(143));
    let log = operator.log();
    let said = |needle: &str| log.lines().any(|l| l.contains(needle) && l.contains(&slow));
    assert!(
        said("WARN") && said("taking over a run whose worker's lease lapsed") && said("from=dies"),
        "{log}"
    );
    assert!(said("run done"), "{log}");
    let failed = log
        .lines()
        .any(|l| l.contains("WARN") && l.contains("run failed") && l.contains(&unknown));
    assert!(failed, "{log}");
    assert!(!log.contains("node started"), "a line per node: {log}");
}
