//! What the kill tests share: a child process is this test binary run again with one hidden
//! (`#[ignore]`d) test selected; it logs what it does durably (fsync per line), runs or resumes
//! its thread until it ends, and is killed with SIGKILL by the parent, which then reads the log.
//! Include with `#[path = "support/killed_child.rs"] mod killed_child;`.
#![allow(dead_code)] // each test binary uses its own part

use futures::StreamExt;
use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::{Event, Resume, RunConfig, RunError, RunOutcome, RunStatus};
use stategraph::{CompiledGraph, State};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a child waits for a killed process to let go of the store or the thread.
const LET_GO: Duration = Duration::from_secs(20);

/// Appends `text` to the log at `log`, durably: a line a killed child wrote is there.
pub fn log_line(log: &Path, text: &str) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    file.write_all(format!("{text}\n").as_bytes()).unwrap();
    file.sync_data().unwrap();
}

/// The lines of the log at `log` (none when nothing was written yet).
pub fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Retries `open` while a killed process still holds what it opens (its lock lingers for a
/// moment while it dies).
pub fn open_retrying<T, E: std::fmt::Display>(mut open: impl FnMut() -> Result<T, E>) -> T {
    let deadline = Instant::now() + LET_GO;
    loop {
        match open() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("cannot open: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Starts this test binary again running only the hidden test `child`, with `env` set to
/// `value`; its stderr is piped so a failing child can be shown.
pub fn spawn_self(child: &str, env: &str, value: impl AsRef<std::ffi::OsStr>) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            child,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env, value)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A multi-threaded runtime for a child's `main`.
pub fn child_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `thread` to its end: starts it with `input` when it does not exist yet, else resumes it
/// where the killed process left it, waiting while the killed run's lease has not lapsed.
pub async fn run_or_resume<S: State>(
    graph: &CompiledGraph<S>,
    thread: &str,
    input: impl Fn() -> S::Update,
    config: impl Fn() -> RunConfig,
) -> RunOutcome<S> {
    let deadline = Instant::now() + LET_GO;
    loop {
        let result = match graph.get_state(thread, None).await {
            Ok(_) => graph.resume(thread, Resume::Continue, config()).await,
            Err(RunError::ThreadNotFound { .. }) => graph.invoke(input(), config()).await,
            Err(e) => panic!("cannot read the thread: {e}"),
        };
        match result {
            Ok(out) => return out,
            Err(RunError::Checkpoint(CheckpointError::ThreadBusy { .. }))
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(e) => panic!("run failed: {e}"),
        }
    }
}

/// As [`run_or_resume`], streaming the run: `saved(step)` hears each checkpoint the root graph
/// saves. The thread must end done.
pub async fn stream_to_end<S: State>(
    graph: &CompiledGraph<S>,
    thread: &str,
    input: impl Fn() -> S::Update,
    mut saved: impl FnMut(u64),
) {
    let deadline = Instant::now() + LET_GO;
    loop {
        let mut run = match graph.get_state(thread, None).await {
            Ok(_) => graph.stream_resume(thread, Resume::Continue, RunConfig::new()),
            Err(RunError::ThreadNotFound { .. }) => {
                graph.stream(input(), RunConfig::new().thread(thread))
            }
            Err(e) => panic!("cannot read thread {thread}: {e}"),
        };
        while let Some(event) = run.next().await {
            if let Event::CheckpointSaved { step, .. } = event {
                saved(step);
            }
        }
        match run.outcome().await {
            Ok(out) => {
                assert_eq!(out.status, RunStatus::Done);
                return;
            }
            // The killed process's lease names a dead process: it is taken over at once, but
            // a store may still be letting the dead one go.
            Err(RunError::Checkpoint(CheckpointError::ThreadBusy { .. }))
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(e) => panic!("run failed: {e}"),
        }
    }
}

/// Waits until `child` has logged `line` to `log` (it must not end first), then kills it with
/// SIGKILL.
pub fn kill_when_logged(child: &mut Child, log: &Path, line: &str) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !log_lines(log).iter().any(|l| l == line) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child ended before it logged {line:?}: {:?}",
            log_lines(log)
        );
        assert!(Instant::now() < give_up, "the child never logged {line:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// Waits for `child` to end, which it must do successfully; its stderr is shown otherwise.
pub fn wait_ok(child: Child) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
