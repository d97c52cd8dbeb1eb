//! A user's own `graph` binary inside a test: the test binary runs itself again as that binary,
//! through one of its ignored tests that registers the user's graphs with
//! `stategraph_cli::App`, so the real CLI runs them in a real process. Other children of a
//! test binary (a process that holds a thread, say) use the same pieces: `child_test_args`,
//! `command_line` and `child_spec`, and `hold_thread_lock`.
//!
//! ```ignore
//! #[test]
//! #[ignore = "a child process of these tests, started by them"]
//! fn cli_child() {
//!     own_binary::run_if_child(CHILD_ENV, || App::new().register(MyFactory));
//! }
//! // in a test: current_exe() with own_binary::child_test_args("cli_child"),
//! // env CHILD_ENV = own_binary::command_line(&args); read own_binary::after_mark(&stdout)
//! ```
//!
//! A child is named as the test harness matches it with `--exact`: by its path below the
//! crate, so in a test binary of several modules `"cli_hints::cli_child"`.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

/// Printed by the child before the CLI's own output (the test harness prints its own first).
pub const MARK: &str = "<<<graph output>>>";

/// The child's side: when `env` holds a command line (`command_line`), runs it as `graph` with
/// the CLI `app` builds and exits with its code; in the test run itself, returns at once.
pub fn run_if_child(env: &str, app: impl FnOnce() -> stategraph_cli::App) {
    let Ok(spec) = std::env::var(env) else {
        return;
    };
    let mut args = vec!["graph".to_string()];
    args.extend(spec.split('\u{1f}').map(str::to_string));
    println!("{MARK}");
    let code = app().status_from(args);
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(code));
}

/// The test harness's arguments that run only the ignored test `name` (the child, by its path
/// below the crate).
pub fn child_test_args(name: &str) -> [&str; 5] {
    [
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
}

/// `args` as the child reads them from its environment variable.
pub fn command_line(args: &[String]) -> String {
    args.join("\u{1f}")
}

/// The child's side of `command_line`: the parts its test wrote into `env`, or `None` in the
/// test run itself (the variable is unset).
pub fn child_spec(env: &str) -> Option<Vec<String>> {
    let spec = std::env::var(env).ok()?;
    Some(spec.split('\u{1f}').map(str::to_string).collect())
}

/// Takes the lock of `thread` in the folder store at `db` (`threads/ID/lock`) as the store
/// takes it, and keeps it until the returned file is dropped or the process dies: a process
/// that holds the thread without serving it.
pub fn hold_thread_lock(db: &Path, thread: &str) -> std::fs::File {
    use std::os::unix::io::AsRawFd;
    let folder = db.join("threads").join(thread);
    std::fs::create_dir_all(&folder).expect("the thread's folder");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(folder.join("lock"))
        .expect("the lock file");
    // SAFETY: flock on a descriptor owned by `lock`, which the caller keeps.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    lock
}

/// What the CLI printed: the child's stdout after its mark.
pub fn after_mark(stdout: &str) -> &str {
    stdout
        .split_once(MARK)
        .map_or(stdout, |(_, after)| after.trim_start_matches('\n'))
}

/// How a run of the child ended and what it printed (stdout after the mark).
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `graph --db DB ARGS...` run by this test binary's ignored test `name`, which reads its
/// command line from `env`; `GRAPH_DB` and `RUST_LOG` unset, artifacts under `DB/output`.
pub fn graph_at(name: &str, env: &str, db: &Path, args: &[&str]) -> Out {
    let mut all = vec!["--db".to_string(), db.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(child_test_args(name))
        .env(env, command_line(&all))
        .env_remove("GRAPH_DB")
        .env_remove("RUST_LOG")
        .env("GRAPH_OUT", db.join("output"))
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: after_mark(&String::from_utf8_lossy(&out.stdout)).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}
