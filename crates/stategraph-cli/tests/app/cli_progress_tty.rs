//! Live progress in a real terminal: `graph run` inside tmux, then what the screen shows once the
//! command ended (`tmux capture-pane`). The live spinner lines must all be gone, each finished
//! step shown once, and what the user needs (the thread, the pause and how to continue, the
//! document) still there.
//!
//! Retries and failures need a graph of the tests' own (`jobs`), run by this test binary as a
//! user's own `graph` binary (`App::new().register(...)`) would (the hidden `cli_child` test).
//! One test shows a run without a terminal: plain log lines. One types Ctrl+C after the run
//! ended, while its answer waits on a pipe.
//!
//! These tests need `tmux` (CI's `.ci/run` installs it); without it they fail and say so.

use crate::harness;

use harness::Db;
use serde::{Deserialize, Serialize};
use stategraph::graph::{CompiledGraph, RetryPolicy};
use stategraph::runtime::{Context, NodeError};
use stategraph::{Send, State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one command may take in the terminal before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(90);

/// A tmux server of its own (its own socket), killed when the test ends, pass or fail.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts a server whose one window (120 × 50) runs `script` with `sh` in `dir`.
    fn start(dir: &Path, script: &str) -> Tmux {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "stategraph-progress-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let tmux = Tmux { socket };
        let out = tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "50",
            "-c",
            &dir.display().to_string(),
            "sh",
            "-c",
            script,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        // Its own server even when the tests run inside a tmux session.
        match Command::new("tmux")
            .env_remove("TMUX")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
        {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "these tests need tmux (a real terminal to draw the live progress in), and it \
                 is not installed: install it (apt-get install tmux; CI's .ci/run does)"
            ),
            Err(e) => panic!("cannot run tmux: {e}"),
        }
    }

    /// The whole pane, scrollback included, trailing blanks dropped. Lines are as the screen
    /// shows them (not joined: a live line fills the width to its end).
    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-S", "-"]);
        assert!(
            out.status.success(),
            "tmux capture-pane failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_string()
    }

    /// Waits until the screen shows `needle`.
    fn wait_for(&self, needle: &str) {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the terminal never showed {needle:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `keys` (tmux key names: `C-c` is Ctrl+C).
    fn keys(&self, keys: &str) {
        let out = self.run(&["send-keys", keys]);
        assert!(
            out.status.success(),
            "tmux send-keys failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits for the script's `EXIT=<code>` line and returns the code and the final screen.
    fn wait_for_exit(&self) -> (i32, String) {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if let Some(code) = screen
                .lines()
                .find_map(|l| l.strip_prefix("EXIT="))
                .and_then(|c| c.trim().parse().ok())
            {
                // The screen once the command is over: that is what a user is left looking at.
                return (code, self.screen());
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the command did not end in the terminal; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .env_remove("TMUX")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// `s` quoted for `sh`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Starts `graph --db <db> <args>` in a fresh terminal. The shell prints `EXIT=<code>` when it
/// ends, then waits, so the pane stays to be read; it outlives a Ctrl+C and its terminal
/// closing (its traps), as a user's interactive shell does.
fn start_in_terminal(db: &Db, args: &[&str]) -> Tmux {
    let mut command = vec![
        env!("CARGO_BIN_EXE_graph").to_string(),
        "--db".into(),
        db.path().display().to_string(),
    ];
    command.extend(args.iter().map(|a| a.to_string()));
    start_command(db, &command, &[])
}

/// Starts `command` (with `vars` set) in a fresh terminal, as [`start_in_terminal`] does.
fn start_command(db: &Db, command: &[String], vars: &[(&str, String)]) -> Tmux {
    let mut line = vec!["env".to_string()];
    // Nothing from the environment the tests run in: no store, no log filter, no model.
    for var in [
        "GRAPH_DB",
        "RUST_LOG",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GRAPH_PROVIDER",
        "GRAPH_MODEL",
        "TAVILY_API_KEY",
    ] {
        line.extend(["-u".to_string(), var.to_string()]);
    }
    line.push(format!(
        "GRAPH_OUT={}",
        quoted(&db.out().display().to_string())
    ));
    line.extend(vars.iter().map(|(k, v)| format!("{k}={}", quoted(v))));
    line.extend(command.iter().map(|a| quoted(a)));
    // The command writes its pid first (`exec` keeps it), for the tests that signal it.
    let script = format!(
        "trap : INT HUP; sh -c 'echo $$ > {}; exec \"$@\"' sh {}; echo EXIT=$?; exec sleep 600",
        quoted(&pid_file(db).display().to_string()),
        line.join(" ")
    );
    // Run in the store's folder: the built-in graph files, not a `./graphs/` the tests run beside.
    Tmux::start(db.path(), &script)
}

/// Where the command started in a terminal writes its pid.
fn pid_file(db: &Db) -> std::path::PathBuf {
    db.path().join("graph.pid")
}

/// Sends `signal` to the command started in `db`'s terminal.
fn signal_command(db: &Db, signal: i32) {
    let text = std::fs::read_to_string(pid_file(db)).expect("the command wrote its pid");
    let pid: libc::pid_t = text.trim().parse().expect("a pid");
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
}

/// Runs `graph --db <db> <args>` in a fresh terminal and returns its exit code and what the
/// terminal shows once it ended.
fn in_terminal(db: &Db, args: &[&str]) -> (i32, String) {
    start_in_terminal(db, args).wait_for_exit()
}

/// Fails the test if a live line is still on the screen: a spinner glyph (indicatif's spinner
/// draws Braille patterns) or the live lines' "N steps done" text.
fn no_live_lines_remain(screen: &str) {
    let stale: Vec<&str> = screen
        .lines()
        .filter(|l| {
            l.chars().any(|c| ('\u{2800}'..='\u{28FF}').contains(&c))
                || l.contains("steps done")
                || l.contains("step done")
        })
        .collect();
    assert!(
        stale.is_empty(),
        "stale live progress lines remain on the screen: {stale:#?}\n--- screen\n{screen}"
    );
}

/// Fails the test unless each of `steps` (`✓ step N label`) is shown exactly once.
fn each_step_shown_once(screen: &str, steps: &[&str]) {
    for step in steps {
        let shown = screen
            .lines()
            .filter(|l| l.starts_with(&format!("{step} (")))
            .count();
        assert_eq!(
            shown, 1,
            "`{step}` is shown {shown} times, not once\n--- screen\n{screen}"
        );
    }
    let finished = screen.lines().filter(|l| l.starts_with("✓ step ")).count();
    assert_eq!(
        finished,
        steps.len(),
        "the finished steps shown are not {steps:#?}\n--- screen\n{screen}"
    );
}

fn has(screen: &str, needles: &[&str]) {
    for n in needles {
        assert!(
            screen.contains(n),
            "the screen lacks {n:?}\n--- screen\n{screen}"
        );
    }
}

/// The pipeline's steps up to its review: the outline, then three sections drafted in parallel.
const TO_REVIEW: [&str; 4] = [
    "✓ step 1 outline",
    "✓ step 2 draft #0",
    "✓ step 2 draft #1",
    "✓ step 2 draft #2",
];

#[test]
fn a_run_that_pauses_for_review_leaves_no_live_lines() {
    let db = Db::new();
    let (code, screen) = in_terminal(
        &db,
        &["run", "pipeline", "--input", "sled", "--set", "step_ms=300"],
    );
    assert_eq!(code, 3, "a pause for review exits 3\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    each_step_shown_once(&screen, &TO_REVIEW);
    has(
        &screen,
        &[
            "thread ",
            "paused at step",
            "Publish this document?",
            "graph resume",
        ],
    );
}

#[test]
fn a_run_that_finishes_leaves_no_live_lines() {
    let db = Db::new();
    let (code, screen) = in_terminal(
        &db,
        &[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=300",
        ],
    );
    assert_eq!(code, 0, "a finished run exits 0\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    let mut steps = TO_REVIEW.to_vec();
    steps.extend(["✓ step 3 review", "✓ step 4 publish"]);
    each_step_shown_once(&screen, &steps);
    has(&screen, &["thread ", "# A short guide to sled"]);
}

#[test]
fn a_resumed_run_leaves_no_live_lines() {
    let db = Db::new();
    let thread = db.paused_thread();
    let (code, screen) = in_terminal(&db, &["resume", &thread, "--resume", "yes"]);
    assert_eq!(
        code, 0,
        "an approved review publishes\n--- screen\n{screen}"
    );
    no_live_lines_remain(&screen);
    each_step_shown_once(&screen, &["✓ step 3 review", "✓ step 4 publish"]);
    has(&screen, &["# A short guide to sled"]);
}

#[test]
fn log_lines_go_above_the_live_lines() {
    let db = Db::new();
    // `-vv` logs the store's and the runtime's debug lines while the tasks run.
    let (code, screen) = in_terminal(
        &db,
        &[
            "-vv",
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=300",
        ],
    );
    assert_eq!(code, 0, "a finished run exits 0\n--- screen\n{screen}");
    has(&screen, &[" DEBUG "]);
    no_live_lines_remain(&screen);
    let mut steps = TO_REVIEW.to_vec();
    steps.extend(["✓ step 3 review", "✓ step 4 publish"]);
    each_step_shown_once(&screen, &steps);
}

#[test]
fn the_memo_graph_with_its_stage_lines_leaves_no_live_lines() {
    let db = Db::new();
    let dataroom = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom");
    let (code, screen) = in_terminal(
        &db,
        &[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            &format!("dataroom={}", dataroom.display()),
            "--set",
            "stage_ms=100",
        ],
    );
    assert_eq!(code, 0, "the offline memo finishes\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    let stages = [
        "deck_analyst",
        "research",
        "section_research",
        "draft",
        "enrich_trademark",
        "enrich_socials",
        "enrich_links",
        "enrich_visualizations",
        "cite",
        "validate_citations",
        "fact_check",
        "validate",
        "finalize",
    ];
    let steps: Vec<String> = (1..)
        .zip(stages)
        .map(|(step, stage)| format!("✓ step {step} {stage}"))
        .collect();
    each_step_shown_once(
        &screen,
        &steps.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    has(&screen, &["stage 13 of 13", "finished after 13 steps"]);
}

#[test]
fn ctrl_c_during_parallel_tasks_leaves_no_live_lines() {
    let db = Db::new();
    // Long steps: the three drafts are still running when Ctrl+C comes.
    let tmux = start_in_terminal(
        &db,
        &[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--set",
            "step_ms=5000",
        ],
    );
    tmux.wait_for("step 2 draft #2 ·");
    tmux.keys("C-c");
    let (code, screen) = tmux.wait_for_exit();
    assert_eq!(code, 130, "Ctrl+C stops the run\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    each_step_shown_once(&screen, &["✓ step 1 outline"]);
    has(
        &screen,
        &[
            "stopping: the step in flight is abandoned",
            "the last checkpoint is kept",
            "graph resume",
        ],
    );
}

#[test]
fn sigterm_during_parallel_tasks_leaves_no_live_lines() {
    let db = Db::new();
    let tmux = start_in_terminal(
        &db,
        &[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--set",
            "step_ms=5000",
        ],
    );
    tmux.wait_for("step 2 draft #2 ·");
    signal_command(&db, libc::SIGTERM);
    let (code, screen) = tmux.wait_for_exit();
    assert_eq!(code, 143, "SIGTERM drains the run\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    // The drafts in flight finish (a drain), each shown once.
    each_step_shown_once(
        &screen,
        &[
            "✓ step 1 outline",
            "✓ step 2 draft #0",
            "✓ step 2 draft #1",
            "✓ step 2 draft #2",
        ],
    );
    has(
        &screen,
        &[
            "draining on SIGTERM: the step in flight finishes and is saved",
            "drained on SIGTERM: step 2 of thread",
            "graph resume",
        ],
    );
}

/// Ctrl+C typed after the run ended, while its report waits to write a long answer into a pipe
/// (`graph run ... | sleep 600`, a reader that reads nothing): heard, not swallowed (tokio had
/// listened during the run and kept its handler: the command went on to exit 0), and the
/// command ends with 130. The same Ctrl+C ends `sleep`, so the waiting write fails at once and
/// the command may end before its watcher could say anything: the code must be right anyway.
#[test]
fn ctrl_c_after_the_run_ended_is_said_and_ends_the_command_with_130() {
    let db = Db::new();
    let input = db.path().join("input.json");
    let topic = "sled ".repeat(8000);
    std::fs::write(&input, format!(r#"{{"topic": "{topic}"}}"#)).unwrap();
    let graph = [
        env!("CARGO_BIN_EXE_graph"),
        "--db",
        &db.path().display().to_string(),
        "run",
        "pipeline",
        "--input-file",
        &input.display().to_string(),
        "--set",
        "step_ms=1",
        "--yes",
    ]
    .map(quoted)
    .join(" ");
    // The subshell outlives the Ctrl+C (its trap, reset for `graph` at exec) to say how
    // `graph` ended; `sleep` holds the pipe open and dies of the Ctrl+C.
    let pipeline = format!("{{ trap : INT; {graph}; echo GRAPH_EXIT=$? >&2; }} | sleep 600");
    let tmux = start_command(&db, &["sh".into(), "-c".into(), pipeline], &[]);
    tmux.wait_for("done: thread");
    tmux.keys("C-c");
    tmux.wait_for("GRAPH_EXIT=");
    let screen = tmux.screen();
    no_live_lines_remain(&screen);
    has(&screen, &["GRAPH_EXIT=130"]);
    if let Some(notice) = screen.lines().find(|l| l.starts_with("Ctrl+C:")) {
        assert!(
            notice.starts_with("Ctrl+C: the run had already ended, its checkpoints are kept; finishing up, then exiting with 130"),
            "{screen}"
        );
    }
}

/// Where `exit_status_of` finds the command it runs (arguments joined by U+001F), and the file
/// it writes the command's pid to, then how it ended (`exit N` or `signal N`).
const WRAP_ARGS_ENV: &str = "STATEGRAPH_PROGRESS_TTY_WRAP_ARGS";
const WRAP_PID_ENV: &str = "STATEGRAPH_PROGRESS_TTY_WRAP_PID";
const WRAP_STATUS_ENV: &str = "STATEGRAPH_PROGRESS_TTY_WRAP_STATUS";

/// Runs a command and writes down how it ended, told apart as the shell cannot: a process that
/// exited 129 itself, and one that a SIGHUP killed.
#[test]
#[ignore = "a wrapper process of the cli_progress_tty tests, started by them"]
fn exit_status_of() {
    use std::os::unix::process::ExitStatusExt;
    let (Ok(spec), Ok(pid_file), Ok(status_file)) = (
        std::env::var(WRAP_ARGS_ENV),
        std::env::var(WRAP_PID_ENV),
        std::env::var(WRAP_STATUS_ENV),
    ) else {
        return;
    };
    let args: Vec<&str> = spec.split('\u{1f}').collect();
    let mut child = Command::new(args[0]).args(&args[1..]).spawn().unwrap();
    std::fs::write(&pid_file, child.id().to_string()).unwrap();
    let status = child.wait().unwrap();
    let ended = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "unknown".to_string(),
    };
    std::fs::write(&status_file, ended).unwrap();
}

/// Waits until the terminal of the command started in `db`'s terminal is gone: the device its
/// stderr names was removed, as the kernel does when it hangs the terminal up.
fn until_its_terminal_is_gone(db: &Db) {
    let pid = std::fs::read_to_string(pid_file(db)).expect("the command wrote its pid");
    let stderr = format!("/proc/{}/fd/2", pid.trim());
    let start = Instant::now();
    loop {
        let device = std::fs::read_link(&stderr).expect("the command's stderr");
        if !device.exists() {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the command's terminal {} is still there",
            device.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `graph --db <db> <args>` in a fresh terminal under `exit_status_of`; returns the
/// terminal and the file that says how the command ended.
fn watched_in_terminal(db: &Db, args: &[&str]) -> (Tmux, std::path::PathBuf) {
    let status_file = db.path().join("status");
    let mut graph = vec![
        env!("CARGO_BIN_EXE_graph").to_string(),
        "--db".into(),
        db.path().display().to_string(),
    ];
    graph.extend(args.iter().map(|a| a.to_string()));
    let command: Vec<String> = [
        std::env::current_exe().unwrap().display().to_string(),
        "cli_progress_tty::exit_status_of".into(),
        "--exact".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
    .into();
    let vars = [
        (WRAP_ARGS_ENV, graph.join("\u{1f}")),
        (WRAP_PID_ENV, pid_file(db).display().to_string()),
        (WRAP_STATUS_ENV, status_file.display().to_string()),
    ];
    (start_command(db, &command, &vars), status_file)
}

/// How the command `status_file` is about ended, once it has.
fn ended(status_file: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(status_file) {
            return text;
        }
        assert!(start.elapsed() < PATIENCE, "the command did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_run_whose_terminal_closes_stops_on_sighup_and_keeps_its_checkpoint() {
    let db = Db::new();
    let (tmux, status_file) = watched_in_terminal(
        &db,
        &[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=5000",
        ],
    );
    tmux.wait_for("step 2 draft #2 ·");
    // The terminal closes (its server is gone)...
    drop(tmux);
    until_its_terminal_is_gone(&db);
    // ...and the shell that ran the command sends its jobs SIGHUP, as an interactive shell does.
    signal_command(&db, libc::SIGHUP);
    // Not "signal 1" (killed, the default) nor a panic writing to the closed terminal (101).
    assert_eq!(ended(&status_file), "exit 129");
    let listed = db.listed();
    assert_eq!(listed[0]["status"], "stopped", "{listed:#?}");
    let thread = listed[0]["thread_id"].as_str().unwrap().to_string();
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    // The outline is kept, the drafts abandoned.
    assert_eq!(
        state["next"],
        serde_json::json!(["draft", "draft", "draft"])
    );
    db.graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
}

#[test]
fn a_run_that_outlives_its_terminal_finishes_and_its_artifact_warnings_go_nowhere() {
    let db = Db::new();
    let (tmux, status_file) = watched_in_terminal(
        &db,
        &[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "artifacts=true",
            "--set",
            "step_ms=2000",
        ],
    );
    tmux.wait_for("step 1 outline ·");
    // The terminal closes, and no SIGHUP reaches the run (its shell did not pass one on).
    drop(tmux);
    until_its_terminal_is_gone(&db);
    // The version folder becomes a file: the next checkpoint's artifacts cannot be written, and
    // the writer warns (on the closed terminal, where an `eprintln!` panics).
    let folder = db.out().join("pipeline-v1");
    std::fs::remove_dir_all(&folder).unwrap();
    std::fs::write(&folder, "not a folder").unwrap();
    assert_eq!(ended(&status_file), "exit 0");
    let listed = db.listed();
    assert_eq!(listed[0]["status"], "done", "{listed:#?}");
}

#[test]
fn without_a_terminal_progress_is_plain_lines_naming_parallel_tasks_once() {
    let db = Db::new();
    let out = db
        .graph(&["run", "pipeline", "--input", "sled", "--set", "step_ms=1"])
        .expect(3);
    no_live_lines_remain(&out.stderr);
    out.stderr_has(&[
        "step 1: checkpoint saved; next: draft (3 tasks)\n",
        "step 2: draft #2 done in",
    ]);
    for task in 0..3 {
        let started = format!("step 2: draft #{task} started");
        assert_eq!(out.stderr.matches(&started).count(), 1, "{out}");
    }
}

/// Where `cli_child` finds its command line (arguments joined by U+001F).
const CHILD_ENV: &str = "STATEGRAPH_PROGRESS_TTY_ARGS";

/// Three parallel jobs: job 1 fails once and is retried; job 2 fails for good when `fail`.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Jobs {
    fail: bool,
    #[state(append)]
    done: Vec<usize>,
}

struct JobsFactory;

impl GraphFactory for JobsFactory {
    type State = Jobs;

    fn name(&self) -> &str {
        "jobs"
    }

    fn description(&self) -> &str {
        "three parallel jobs, one retried"
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Jobs>, BuildError> {
        let mut g = StateGraph::<Jobs>::named("jobs");
        g.add_node("work", |s: Arc<Jobs>, ctx: Context| async move {
            let job: usize = ctx.arg()?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            if job == 1 && ctx.attempt() == 1 {
                return Err(NodeError::transient("job 1 hit a busy server"));
            }
            if job == 2 && s.fail {
                return Err(NodeError::new("job 2 broke"));
            }
            Ok::<_, NodeError>(JobsUpdate::default().done(vec![job]))
        })
        .retry(RetryPolicy::new(3).initial_interval(Duration::from_millis(100)));
        g.add_conditional_edges(
            START,
            |_j: &Jobs| {
                (0..3usize)
                    .map(|i| Send::new("work", i))
                    .collect::<Vec<_>>()
            },
            ["work"],
        );
        g.add_edge("work", END);
        Ok(g.compile()?)
    }
}

#[test]
#[ignore = "a child process of the cli_progress_tty tests, started by them"]
fn cli_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut args = vec!["graph".to_string()];
    args.extend(spec.split('\u{1f}').map(str::to_string));
    let code = stategraph_cli::App::new()
        .register(JobsFactory)
        .status_from(args);
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(code));
}

/// Runs `graph --db <db> <args>` with `jobs` registered in a fresh terminal.
fn jobs_in_terminal(db: &Db, args: &[&str]) -> (i32, String) {
    let command: Vec<String> = [
        "cli_progress_tty::cli_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut spec = vec!["--db".to_string(), db.path().display().to_string()];
    spec.extend(args.iter().map(|a| a.to_string()));
    let exe = std::env::current_exe().unwrap().display().to_string();
    let command: Vec<String> = std::iter::once(exe).chain(command).collect();
    start_command(db, &command, &[(CHILD_ENV, spec.join("\u{1f}"))]).wait_for_exit()
}

#[test]
fn a_retried_task_leaves_no_live_lines() {
    let db = Db::new();
    let (code, screen) = jobs_in_terminal(&db, &["run", "jobs", "--input-json", "{}"]);
    assert_eq!(code, 0, "the retried job succeeds\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    each_step_shown_once(
        &screen,
        &["✓ step 1 work #0", "✓ step 1 work #1", "✓ step 1 work #2"],
    );
    has(
        &screen,
        &[
            "✗ step 1 work #1 attempt 1 failed: job 1 hit a busy server; retrying",
            "finished after 1 step\n",
        ],
    );
}

#[test]
fn a_task_that_fails_for_good_leaves_no_live_lines() {
    let db = Db::new();
    let (code, screen) =
        jobs_in_terminal(&db, &["run", "jobs", "--input-json", r#"{"fail": true}"#]);
    assert_eq!(code, 1, "a failed job fails the run\n--- screen\n{screen}");
    no_live_lines_remain(&screen);
    has(
        &screen,
        &[
            "✗ step 1 work #2 attempt 1 failed: job 2 broke",
            "after 1 attempt: job 2 broke",
        ],
    );
}
