//! What the run queue's CLI tests share: a real Postgres cluster (the postgres crate's fixture,
//! included by path: a test file of the crate whose README documents it), the `graph` binary
//! run against a database, `graph worker` processes whose node executions are read from their
//! log (`node started`, `-v`), and the pipeline's state as an uninterrupted run ends it.

#![allow(dead_code)]

#[path = "../../../stategraph-postgres/tests/support/pg_cluster.rs"]
pub mod pg_cluster;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The `graph` binary run against one database, from a folder of its own.
pub struct Graph {
    pub url: String,
    pub dir: PathBuf,
}

impl Graph {
    pub fn new(url: &str, dir: &Path) -> Graph {
        Graph {
            url: url.to_string(),
            dir: dir.to_path_buf(),
        }
    }

    /// `graph ARGS --db URL`, in the test's folder, without colours or a user's GRAPH_DB.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_graph"));
        cmd.args(args)
            .arg("--db")
            .arg(&self.url)
            .current_dir(&self.dir)
            .env_remove("GRAPH_DB")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .env("HOME", &self.dir);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("graph runs")
    }

    /// Runs a command that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "graph {args:?} failed ({:?}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must succeed, retrying while the database restarts (a connection
    /// refused or cut), up to `within`; its stdout.
    pub fn ok_retrying(&self, args: &[&str], within: Duration) -> String {
        let give_up = Instant::now() + within;
        loop {
            let out = self.run(args);
            if out.status.success() {
                return String::from_utf8(out.stdout).unwrap();
            }
            assert!(
                Instant::now() < give_up,
                "graph {args:?} kept failing ({:?}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// `graph runs --json`: every run, newest first.
    pub fn runs(&self) -> Vec<Value> {
        let text = self.ok(&["runs", "--json", "--limit", "100000"]);
        let doc: Value = serde_json::from_str(&text).unwrap();
        doc["runs"].as_array().unwrap().clone()
    }

    /// As [`runs`](Self::runs), retrying while the database restarts.
    pub fn runs_retrying(&self) -> Vec<Value> {
        let text = self.ok_retrying(
            &["runs", "--json", "--limit", "100000"],
            Duration::from_secs(60),
        );
        let doc: Value = serde_json::from_str(&text).unwrap();
        doc["runs"].as_array().unwrap().clone()
    }

    /// A `graph worker` process, its log read as it comes, with every node it begins.
    pub fn worker(&self, id: &str, extra: &[&str]) -> WorkerProc {
        let mut args = vec!["worker", "-v", "--id", id];
        args.extend_from_slice(extra);
        let mut cmd = self.cmd(&args);
        cmd.env("RUST_LOG", "warn,stategraph_worker=info");
        Self::spawn_worker(id, cmd)
    }

    /// A `graph worker` process at its default log level (no `-v`, no `RUST_LOG`), as an
    /// operator starts it.
    pub fn worker_by_default(&self, id: &str, extra: &[&str]) -> WorkerProc {
        let mut args = vec!["worker", "--id", id];
        args.extend_from_slice(extra);
        Self::spawn_worker(id, self.cmd(&args))
    }

    fn spawn_worker(id: &str, mut cmd: Command) -> WorkerProc {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("graph worker starts");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = std::thread::spawn({
            let lines = lines.clone();
            move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            }
        });
        WorkerProc {
            id: id.to_string(),
            child,
            lines,
            reader: Some(reader),
        }
    }
}

/// A `graph worker` process.
pub struct WorkerProc {
    pub id: String,
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl WorkerProc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped yet, so
        // its pid cannot have been reused.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// Waits for the process to end (its log read to the end); its exit status.
    pub fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let give_up = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.reader.take() {
                    reader.join().unwrap();
                }
                return status;
            }
            assert!(
                Instant::now() < give_up,
                "worker {} did not end within {within:?}; its log:\n{}",
                self.id,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(10));
    }

    pub fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The nodes it began, as its log says.
    pub fn executions(&self) -> Vec<Execution> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter_map(|l| Execution::parse(l, &self.id))
            .collect()
    }

    /// How many lines of its log say `needle`.
    pub fn count(&self, needle: &str) -> usize {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|l| l.contains(needle)).count()
    }
}

impl Drop for WorkerProc {
    /// A test that fails leaves no worker behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One node a worker began: a `node started` line of its log.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Execution {
    /// The log line's time (RFC 3339 in UTC, so ordered as text).
    pub at: String,
    pub worker: String,
    pub run: String,
    pub thread: String,
    pub step: u64,
    pub node: String,
    pub task: u64,
}

impl Execution {
    fn parse(line: &str, worker: &str) -> Option<Execution> {
        if !line.contains("node started") {
            return None;
        }
        let at = line.split_whitespace().next()?.to_string();
        let field = |name: &str| -> Option<String> {
            let key = format!(" {name}=");
            let start = line.find(&key)? + key.len();
            let value = line[start..].split_whitespace().next()?;
            Some(value.trim_matches('"').to_string())
        };
        Some(Execution {
            at,
            worker: worker.to_string(),
            run: field("run")?,
            thread: field("thread")?,
            step: field("step")?.parse().ok()?,
            node: field("node")?,
            task: field("task")?.parse().ok()?,
        })
    }
}

/// Waits until `ready` holds, polling every 100 ms, up to `within`.
pub fn wait_until(within: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let give_up = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The runs of `runs` on `thread`.
pub fn of_thread<'a>(runs: &'a [Value], thread: &str) -> Vec<&'a Value> {
    runs.iter().filter(|r| r["thread_id"] == thread).collect()
}

/// Checks that a task run twice was never saved by the worker that ran it first: that worker
/// began no later step of the thread before the task ran again. Returns how many ran again.
pub fn check_executions(executions: &[Execution]) -> usize {
    let mut tasks: BTreeMap<(&str, u64, &str, u64), Vec<&Execution>> = BTreeMap::new();
    for e in executions {
        tasks
            .entry((e.thread.as_str(), e.step, e.node.as_str(), e.task))
            .or_default()
            .push(e);
    }
    let mut again = 0;
    for ((thread, step, node, task), mut runs) in tasks {
        runs.sort_by(|a, b| a.at.cmp(&b.at));
        for pair in runs.windows(2) {
            let (first, then) = (pair[0], pair[1]);
            let moved_on = executions.iter().find(|e| {
                e.worker == first.worker
                    && e.thread == thread
                    && e.step > step
                    && e.at > first.at
                    && e.at < then.at
            });
            assert!(
                moved_on.is_none(),
                "thread {thread} step {step} ({node} task {task}) ran again at {} on {} after \
                 {} had run it at {} and gone on to {:?}: a saved step ran twice",
                then.at,
                then.worker,
                first.worker,
                first.at,
                moved_on
            );
            again += 1;
        }
    }
    again
}
