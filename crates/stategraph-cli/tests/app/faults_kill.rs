//! Kills at an exact point of a run, never after a sleep: a graph of the tests' own (`gated`),
//! whose slow task waits on files the test controls, run by this test binary as a user's own
//! `graph` binary (`App::new().register(..)`) would be (the hidden `gated_child` test).

use crate::harness;

use harness::{Db, Running, TestCommand};
use serde::{Deserialize, Serialize};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError};
use stategraph::{Send, State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where `gated_child` finds its command line (arguments joined by U+001F).
const CHILD_ENV: &str = "STATEGRAPH_FAULTS_KILL_ARGS";

/// How long the test waits for the run to answer through the gate folder.
const PATIENCE: Duration = Duration::from_secs(60);

/// Two parallel tasks of one step: task 0 finishes at once; task 1 waits until the file `open`
/// is in the folder `gate`, and answers a file `ping` there with a file `pong`.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Gated {
    gate: String,
    #[state(append)]
    done: Vec<usize>,
}

struct GatedFactory;

impl GraphFactory for GatedFactory {
    type State = Gated;

    fn name(&self) -> &str {
        "gated"
    }

    fn description(&self) -> &str {
        "two parallel tasks, the second waiting on files the test controls"
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Gated>, BuildError> {
        let mut g = StateGraph::<Gated>::named("gated");
        g.add_node("work", |s: Arc<Gated>, ctx: Context| async move {
            let job: usize = ctx.arg()?;
            if job == 1 {
                wait_at_the_gate(Path::new(&s.gate)).await?;
            }
            Ok::<_, NodeError>(GatedUpdate::default().done(vec![job]))
        });
        g.add_conditional_edges(
            START,
            |_s: &Gated| {
                (0..2usize)
                    .map(|i| Send::new("work", i))
                    .collect::<Vec<_>>()
            },
            ["work"],
        );
        g.add_edge("work", END);
        Ok(g.compile()?)
    }
}

/// Task 1's wait. The step's tasks are polled by the run's own loop, which saves each finished
/// task's result (flushed, in sync mode) before it polls the siblings again
/// (`runtime/executor/tasks.rs`, `run_tasks`). So a `pong` for a `ping` made after task 0
/// printed `done` is written only once task 0's result is on disk: the fact the test kills on.
async fn wait_at_the_gate(gate: &Path) -> Result<(), NodeError> {
    let (ping, pong) = (gate.join("ping"), gate.join("pong"));
    while !gate.join("open").exists() {
        if ping.exists() && !pong.exists() {
            std::fs::write(&pong, "")
                .map_err(|e| NodeError::new(format!("cannot write {}: {e}", pong.display())))?;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

#[test]
#[ignore = "a child process of the faults_kill tests, started by them"]
fn gated_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut args = vec!["graph".to_string()];
    args.extend(spec.split('\u{1f}').map(str::to_string));
    let code = stategraph_cli::App::new()
        .register(GatedFactory)
        .status_from(args);
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(code));
}

/// `graph --db <db> <args>` with `gated` registered: this test binary running `gated_child`.
fn gated(db: &Db, args: &[&str]) -> TestCommand {
    let exe = std::env::current_exe().expect("the test binary's path");
    let child = [
        "faults_kill::gated_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    let mut spec = vec!["--db".to_string(), db.path().display().to_string()];
    spec.extend(args.iter().map(|a| a.to_string()));
    TestCommand::program(&exe, &child, &format!("graph {}", args.join(" ")))
        .env(CHILD_ENV, spec.join("\u{1f}"))
        .env("GRAPH_OUT", db.out())
}

/// Waits until `file` exists while `run` is still running; fails the test after a while.
fn wait_for_file(run: &mut Running, file: &Path) {
    let start = Instant::now();
    while !file.exists() {
        assert!(
            run.is_running(),
            "the run ended before writing {}\n{}",
            file.display(),
            run.stderr()
        );
        assert!(
            start.elapsed() < PATIENCE,
            "the run never wrote {}\n{}",
            file.display(),
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_kill_after_a_sibling_task_finished_never_runs_it_again_in_sync_mode() {
    let db = Db::new();
    let gate = tempfile::tempdir().expect("a gate folder");
    let input = serde_json::json!({ "gate": gate.path() }).to_string();
    let mut run = gated(
        &db,
        &[
            "run",
            "gated",
            "--input-json",
            &input,
            "--durability",
            "sync",
        ],
    )
    .spawn();
    let thread = run.thread();
    run.wait_for("work #0 done");
    std::fs::write(gate.path().join("ping"), "").expect("write ping");
    wait_for_file(&mut run, &gate.path().join("pong"));
    run.signal(libc::SIGKILL);
    let killed = run.finish();
    assert!(
        !killed.stderr.contains("work #1 done"),
        "task 1 cannot finish before the gate opens\n{killed}"
    );

    std::fs::write(gate.path().join("open"), "").expect("open the gate");
    let resumed = gated(&db, &["resume", &thread]).expect(0);
    // Only task 1 runs again; both running would be shown as `work #0` and `work #1`.
    assert!(
        !resumed.stderr.contains("work #0 started"),
        "task 0 had finished before the kill and ran again\n{resumed}"
    );
    resumed.stderr_has(&["step 1: work started"]);
    let state = gated(&db, &["state", &thread, "--json"]).expect(0);
    // The test harness of the child prints its own words before the command's JSON.
    let json = &state.stdout[state.stdout.find('{').unwrap_or(0)..];
    let state: serde_json::Value = serde_json::from_str(json).expect("state --json");
    assert_eq!(
        state["values"]["done"],
        serde_json::json!([0, 1]),
        "{state:#}"
    );
}
