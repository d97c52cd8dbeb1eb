//! Every line the CLI writes to stdout and stderr goes through here, because `println!` and
//! `eprintln!` panic when the write fails: `graph run pipeline 2>&1 | head -2` closed the pipe
//! after two lines and the run died at its next progress line (exit 101).
//!
//! - stderr (progress, notes, errors) says things to a person; when it cannot be written (the
//!   reader went away, the terminal closed) there is nobody to say them to, so the failure is
//!   ignored and the command goes on.
//! - stdout is the command's result. Once a write to it fails (EPIPE: `graph history | head`),
//!   nothing more is written to it, as a Unix tool stops writing when its reader is gone.
//!   Rust ignores SIGPIPE, so the process is not killed by it: the command finishes what it
//!   must first (a thread's store is closed and indexed, never left half-written), then ends
//!   with 141, the code a shell shows for a tool SIGPIPE killed, where it would have ended with
//!   0 ([`exit_code`]); a code that says more (paused, failed, stopped by a signal) is kept. So
//!   `set -o pipefail` sees what it sees of `ls | head`.
//! - A run whose stderr closed (`graph run ... 2>&1 | head -2`: its progress lines) goes on to
//!   the end: its job is the thread in the store, which every step already paid for and saved;
//!   stopping it would leave a half-done thread to resume because someone read only the first
//!   lines of its log. Its result on stdout then finds the pipe closed too: exit 141.
//! - A `--stream` run's stdout is its events: once its reader is gone ([`reader_gone`], or a
//!   failed write) the run stops as on a signal, keeping its last checkpoint, and ends with 141
//!   (`cmd/run/stop.rs` says why).
//!
//! While a run's live progress lines are shown, stderr is written through
//! [`Progress`](super::progress::Progress) instead (ARCHITECTURE.md: nothing writes to stderr
//! behind the live lines); this is what it uses when there are none.

use super::error::{EXIT_BROKEN_PIPE, EXIT_DONE};
use std::io::Write as _;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Set once a write to stdout failed: its reader is gone.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` and a newline to stdout, unless an earlier write found it closed.
pub(crate) fn out(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{text}").and_then(|()| stdout.flush());
    if written.is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Whether a write to stdout failed: its reader is gone.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Resolves once stdout is a pipe (or socket) whose reader went away, without writing to it:
/// the kernel then reports an error on its write end. Never resolves where that cannot be
/// watched (a file, `/dev/null`; a terminal reports no such error). A `--stream` run waits on
/// this beside its events, so it stops when its reader goes, not only at its next event, which
/// can be a long model call away.
pub(crate) async fn reader_gone() {
    /// Stdout, borrowed: the watch must not close it when it ends.
    struct Stdout;
    impl AsRawFd for Stdout {
        fn as_raw_fd(&self) -> RawFd {
            libc::STDOUT_FILENO
        }
    }
    if !stdout_is_a_pipe() {
        return std::future::pending().await;
    }
    // SAFETY: descriptor 1 stays open on the same pipe while this runs: nothing in the process
    // closes stdout, and the one place that points it elsewhere (`dup2` in cmd/run/stop.rs)
    // does so only for a terminal that hung up, never a pipe. Registering only asks epoll
    // about the descriptor; writes to it stay as they are.
    let registered = unsafe { AsyncFd::register_with_interest(Stdout, Interest::ERROR) };
    if let Ok(fd) = registered {
        if fd.ready(Interest::ERROR).await.is_ok() {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            return;
        }
    }
    std::future::pending().await
}

/// Whether stdout is a pipe or a socket: what has a reader that can go away.
fn stdout_is_a_pipe() -> bool {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::FileTypeExt as _;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

/// The exit code of a command that would end with `code`, given what became of stdout: 141
/// instead of success when not all of its output could be written (see the module doc).
pub(crate) fn exit_code(code: u8) -> u8 {
    match code == EXIT_DONE && stdout_closed() {
        true => EXIT_BROKEN_PIPE,
        false => code,
    }
}

/// Writes to stderr; a failure is ignored (see the module doc). Use [`say!`] and [`say_text!`].
pub(crate) fn to_stderr(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `eprintln!` that does not panic when stderr cannot be written.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::to_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` (no newline added) that does not panic when stderr cannot be written.
macro_rules! say_text {
    ($($arg:tt)*) => {
        $crate::output::to_stderr(format_args!($($arg)*))
    };
}
