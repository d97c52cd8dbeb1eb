//! A small harness for driving the real `graph` binary: each test gets its own store, and a
//! command reads like what a user types.
//!
//! ```ignore
//! let db = Db::new();
//! let out = db.graph(&["run", "pipeline", "--input", "sled"]).expect(3);
//! db.graph(&["resume", &out.thread(), "--resume", "yes"]).expect(0);
//! ```
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any one command may take before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);

/// A fresh store (`--db`) in a temporary directory.
pub struct Db {
    dir: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Db {
        Db {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A fresh store in a temporary directory under `parent` (a small filesystem, say).
    pub fn new_in(parent: &Path) -> Db {
        Db {
            dir: tempfile::tempdir_in(parent).expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `graph --db <this store> <args>`.
    pub fn graph(&self, args: &[&str]) -> TestCommand {
        let mut cmd = TestCommand::bare(args);
        cmd.cmd.arg("--db").arg(self.dir.path());
        // Artifact folders go beside the store, not into the folder the tests run in.
        cmd.cmd.env("GRAPH_OUT", self.out());
        cmd
    }

    /// Where runs of this store write their artifact version folders.
    pub fn out(&self) -> PathBuf {
        self.dir.path().join("output")
    }

    /// A thread's store directory.
    pub fn store_dir(&self, thread: &str) -> PathBuf {
        self.dir.path().join("threads").join(thread).join("store")
    }

    /// `graph run pipeline --input sled --set step_ms=STEP_MS <extra>`: the pipeline with each
    /// step taking `step_ms`, which pauses for review unless `extra` holds `--yes`.
    pub fn run_pipeline(&self, step_ms: u64, extra: &[&str]) -> TestCommand {
        let step = format!("step_ms={step_ms}");
        let mut args = vec!["run", "pipeline", "--input", "sled", "--set", &step];
        args.extend_from_slice(extra);
        self.graph(&args)
    }

    /// Runs the pipeline to its end (fast, no pause) and returns the thread id.
    pub fn finished_thread(&self) -> String {
        self.run_pipeline(1, &["--yes"]).expect(0).thread()
    }

    /// Runs the pipeline until it pauses for review and returns the thread id.
    pub fn paused_thread(&self) -> String {
        self.run_pipeline(1, &[]).expect(3).thread()
    }

    /// The rows `graph threads --json` lists.
    pub fn listed(&self) -> Vec<Value> {
        match self.graph(&["threads", "--json"]).expect(0).json() {
            Value::Array(rows) => rows,
            other => panic!("`graph threads --json` is not a list: {other:#}"),
        }
    }

    /// The ids of every thread `graph threads --json` lists.
    pub fn thread_ids(&self) -> Vec<String> {
        self.listed()
            .iter()
            .map(|t| t["thread_id"].as_str().expect("an id").to_string())
            .collect()
    }

    /// The `graph threads --json` row of `thread`; fails the test when it is not listed.
    pub fn row(&self, thread: &str) -> Value {
        let listed = self.listed();
        listed
            .iter()
            .find(|r| r["thread_id"] == thread)
            .cloned()
            .unwrap_or_else(|| panic!("{thread} is not listed: {listed:#?}"))
    }
}

/// A folder to run `graph` in, with graph files of its own: `graph run NAME` there uses
/// `./graphs/NAME.toml`.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Project {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("graphs")).expect("a graphs folder");
        Project { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `graphs/NAME.toml` as the built-in file of `name` changed by `edit` (`str::to_string`
    /// for a plain copy), replacing any earlier one; returns its path.
    pub fn graph_file(&self, name: &str, edit: impl Fn(&str) -> String) -> PathBuf {
        let path = self.dir.path().join("graphs").join(format!("{name}.toml"));
        std::fs::write(&path, edit(&built_in_graph(name))).expect("write a graph file");
        path
    }
}

/// The text of the built-in graph file of `name` (`graphs/NAME.toml` in this repository).
pub fn built_in_graph(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../graphs")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no built-in graph file {}: {e}", path.display()))
}

/// One invocation of the binary.
pub struct TestCommand {
    cmd: Command,
    text: String,
}

impl TestCommand {
    /// `graph <args>` with no `--db` and a clean environment.
    pub fn bare(args: &[&str]) -> TestCommand {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_graph"));
        cmd.args(args)
            .env_remove("GRAPH_DB")
            .env_remove("GRAPH_OUT")
            .env_remove("RUST_LOG");
        TestCommand {
            cmd,
            text: format!("graph {}", args.join(" ")),
        }
    }

    /// `program <args>` in place of `graph`, with the clean environment of [`TestCommand::bare`]:
    /// a test binary acting as a user's own `graph` binary, one that registers graphs of the
    /// test's own (`App::new().register(..)`). `shown` is what a failure names it by.
    pub fn program(program: &Path, args: &[&str], shown: &str) -> TestCommand {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_remove("GRAPH_DB")
            .env_remove("GRAPH_OUT")
            .env_remove("RUST_LOG");
        TestCommand {
            cmd,
            text: shown.to_string(),
        }
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Run in `dir` (where `./graphs/NAME.toml` is looked for, and relative paths start).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.cmd.env_remove(key);
        self
    }

    /// With no model provider configured: nothing inherited from the environment names one.
    pub fn without_model(self) -> Self {
        [
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "GRAPH_PROVIDER",
            "GRAPH_MODEL",
            "TAVILY_API_KEY",
            "EDITOR",
            "VISUAL",
        ]
        .iter()
        .fold(self, |cmd, var| cmd.env_remove(var))
    }

    /// Pointed at a stand-in OpenAI-compatible server, and at nothing else.
    pub fn with_model_at(self, base_url: &str) -> Self {
        self.without_model()
            .env("OPENAI_BASE_URL", base_url)
            .env("OPENAI_API_KEY", "sk-test")
            .env("GRAPH_MODEL", "fake-model")
    }

    /// Started ignoring `signal` (`libc::SIGHUP`), as `nohup` starts a command.
    pub fn ignoring(mut self, signal: i32) -> Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec, calling only signal(2), which is
        // async-signal-safe.
        unsafe {
            self.cmd.pre_exec(move || {
                libc::signal(signal, libc::SIG_IGN);
                Ok(())
            });
        }
        self
    }

    /// Runs it to the end.
    pub fn output(mut self) -> Output {
        let out = self.cmd.output().expect("run the graph binary");
        Output {
            command: self.text,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs it and checks its exit code, showing everything it printed when the code differs.
    pub fn expect(self, code: i32) -> Output {
        let out = self.output();
        assert_eq!(out.code, Some(code), "unexpected exit code\n{out}");
        out
    }

    /// Runs it as `COMMAND 2>&1 | head -LINES`: stdout and stderr into one pipe whose reader
    /// closes after `lines` lines. Returns the lines read and the exit code.
    pub fn piped_into_head(mut self, lines: usize) -> (Vec<String>, Option<i32>) {
        use std::os::fd::{FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // Close-on-exec: the child must not hold the read end too, or closing ours would not
        // close the pipe. SAFETY: pipe2(2) writes two new descriptors into the array it is given.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
            0,
            "pipe"
        );
        // SAFETY: both were just opened by pipe(2) and are owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let second = write.try_clone().expect("dup the pipe's write end");
        let mut child = self
            .cmd
            .stdout(Stdio::from(write))
            .stderr(Stdio::from(second))
            .spawn()
            .expect("spawn the graph binary");
        // The parent's copies of the write end went into `Command` and are closed after spawn
        // (dropped with it below), so the reader sees the end once the child closes its own.
        drop(self.cmd);
        let mut reader = BufReader::new(std::fs::File::from(read));
        let mut read_lines = Vec::new();
        while read_lines.len() < lines {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            read_lines.push(line.trim_end().to_string());
        }
        drop(reader);
        let status = child.wait().expect("wait for the graph binary");
        (read_lines, status.code())
    }

    /// Runs it as `COMMAND | head -LINES` in a terminal: stdout into a pipe whose reader closes
    /// after `lines` lines, stderr kept apart. Returns the lines read and what it printed on
    /// stderr, with its exit code.
    pub fn stdout_into_head(mut self, lines: usize) -> (Vec<String>, Output) {
        let mut child = self
            .cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the graph binary");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut read_lines = Vec::new();
        while read_lines.len() < lines {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            read_lines.push(line.trim_end().to_string());
        }
        drop(reader);
        let status = child.wait().expect("wait for the graph binary");
        let out = Output {
            command: format!("{} | head -{lines}", self.text),
            code: status.code(),
            stdout: read_lines.join("\n"),
            stderr: errors.join().expect("stderr reader"),
        };
        (read_lines, out)
    }

    /// Starts it in the background, collecting stderr line by line.
    pub fn spawn(mut self) -> Running {
        let mut child = self
            .cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the graph binary");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = Arc::new(Mutex::new(String::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        Running {
            child,
            stderr: lines,
            reader: Some(reader),
            command: self.text,
        }
    }
}

/// What a finished command printed.
pub struct Output {
    pub command: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Stdout as one JSON document (fails the test if it is anything else).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e})\n{self}"))
    }

    /// The thread id the command announced on stderr.
    pub fn thread(&self) -> String {
        thread_in(&self.stderr).unwrap_or_else(|| panic!("no `thread ID` line\n{self}"))
    }

    /// The total calls of the usage summary printed on stderr after `heading` (its
    /// `total   N calls ...` line).
    pub fn usage_total(&self, heading: &str) -> u64 {
        let usage = self
            .stderr
            .split(heading)
            .nth(1)
            .unwrap_or_else(|| panic!("no usage summary after {heading:?}: {self}"));
        let total = usage
            .lines()
            .find(|l| l.starts_with("total"))
            .unwrap_or_else(|| panic!("no total line: {self}"));
        total.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Fails the test unless stderr contains every one of `needles`.
    pub fn stderr_has(&self, needles: &[&str]) -> &Self {
        for n in needles {
            assert!(self.stderr.contains(n), "stderr lacks {n:?}\n{self}");
        }
        self
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "$ {}\nexit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }
}

fn thread_in(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("thread "))
        .map(|t| t.trim().to_string())
}

/// A command running in the background.
pub struct Running {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    command: String,
}

impl Running {
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle`; fails the test after a while.
    pub fn wait_for(&mut self, needle: &str) {
        let start = Instant::now();
        while !self.stderr().contains(needle) {
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                panic!(
                    "`{}` ended ({status}) before printing {needle:?}\n{}",
                    self.command,
                    self.stderr()
                );
            }
            assert!(
                start.elapsed() < PATIENCE,
                "`{}` never printed {needle:?}\n{}",
                self.command,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The thread id it announced.
    pub fn thread(&mut self) -> String {
        self.wait_for("thread ");
        std::thread::sleep(Duration::from_millis(20));
        thread_in(&self.stderr()).expect("thread line")
    }

    /// Its stdout, for the test to read when it chooses (unread, a pipe holds 64 KiB, then the
    /// command's next write waits); [`Running::finish`] then has none to collect.
    pub fn take_stdout(&mut self) -> std::process::ChildStdout {
        self.child.stdout.take().expect("stdout not taken yet")
    }

    /// Sends a signal (`libc::SIGINT`, `libc::SIGKILL`...).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.child.id());
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for it to end.
    pub fn finish(mut self) -> Output {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!("`{}` did not finish\n{}", self.command, self.stderr());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let mut stdout = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            use std::io::Read;
            let _ = s.read_to_string(&mut stdout);
        }
        Output {
            command: self.command.clone(),
            code: status.code(),
            stdout,
            stderr: self.stderr(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
