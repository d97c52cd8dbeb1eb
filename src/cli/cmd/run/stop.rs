//! Stopping a run from outside. Ctrl+C (SIGINT), SIGTERM (what `kill`, `docker stop`, systemd
//! and CI runners send) and SIGHUP (the terminal closed) all stop it the same way: the step in
//! flight is abandoned, the last checkpoint is kept (the runtime flushes what async durability
//! still queued), and the command ends with the signal's conventional exit code (128 + its
//! number) after saying how to continue. A second signal quits at once.
//!
//! A signal the process was started ignoring (`nohup`, a script's background job for SIGINT)
//! stays ignored: the one who started it asked for the run to outlive it.

use crate::cli::error::{EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED};
use crate::cli::progress::Notices;
use futures::stream::{FuturesUnordered, StreamExt};
use std::os::fd::AsRawFd;
use std::sync::{Arc, OnceLock};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A signal that stops a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::cli::cmd) enum Stop {
    /// SIGINT: Ctrl+C typed at the terminal.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP: the terminal closed.
    Hangup,
}

impl Stop {
    const ALL: [Stop; 3] = [Stop::Interrupt, Stop::Terminate, Stop::Hangup];

    fn number(self) -> libc::c_int {
        match self {
            Stop::Interrupt => libc::SIGINT,
            Stop::Terminate => libc::SIGTERM,
            Stop::Hangup => libc::SIGHUP,
        }
    }

    /// The exit code of a command it stopped: 128 + the signal's number, as a shell reports a
    /// process the signal ended.
    pub(in crate::cli::cmd) fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => EXIT_INTERRUPTED,
            Stop::Terminate => EXIT_TERMINATED,
            Stop::Hangup => EXIT_HANGUP,
        }
    }

    /// How a person names it.
    pub(in crate::cli::cmd) fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "Ctrl+C",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
        }
    }
}

/// Watches for the signals while a run goes; cancels its token on the first.
pub(super) struct Watcher {
    task: JoinHandle<()>,
    stopped_by: Arc<OnceLock<Stop>>,
}

impl Watcher {
    /// Listens (from now on, not from when the task first runs) for each signal the process
    /// was not started ignoring. On the first, prints through `notices` (not to stderr
    /// directly, so the live progress lines stay right) and cancels `token`; on a second,
    /// quits at once, printing `hint`.
    pub(super) fn start(token: CancellationToken, hint: String, notices: Notices) -> Watcher {
        let listeners: Vec<(Stop, Signal)> = Stop::ALL
            .into_iter()
            .filter(|stop| !ignored(stop.number()))
            .filter_map(|stop| match signal(SignalKind::from_raw(stop.number())) {
                Ok(listener) => Some((stop, listener)),
                Err(e) => {
                    // The run goes on; the signal keeps its default effect.
                    tracing::warn!(signal = stop.name(), error = %e, "cannot listen for a signal");
                    None
                }
            })
            .collect();
        let stopped_by = Arc::new(OnceLock::new());
        let task = tokio::spawn(watch(listeners, token, hint, notices, stopped_by.clone()));
        Watcher { task, stopped_by }
    }

    /// Stops watching; says which signal stopped the run, if one did. A run can outlive its
    /// terminal (closed without a SIGHUP reaching the run): its report then goes nowhere,
    /// rather than panicking on the first line.
    pub(super) fn finish(self) -> Option<Stop> {
        self.task.abort();
        leave_a_hung_up_terminal();
        self.stopped_by.get().copied()
    }
}

async fn watch(
    mut listeners: Vec<(Stop, Signal)>,
    token: CancellationToken,
    hint: String,
    notices: Notices,
    stopped_by: Arc<OnceLock<Stop>>,
) {
    let Some(first) = next(&mut listeners).await else {
        return;
    };
    let _ = stopped_by.set(first);
    let again = match first {
        Stop::Interrupt => "Ctrl+C again quits at once".to_string(),
        other => format!("{} again quits at once", other.name()),
    };
    let text = match first {
        Stop::Interrupt => "stopping".to_string(),
        other => format!("stopping on {}", other.name()),
    };
    let typed = first == Stop::Interrupt;
    let text =
        format!("{text}: the step in flight is abandoned, the last checkpoint is kept ({again})");
    leave_a_hung_up_terminal();
    notices.after_signal(&text, typed);
    // After the notice: the run's report (which follows the cancel) comes below it.
    token.cancel();
    let Some(second) = next(&mut listeners).await else {
        return;
    };
    leave_a_hung_up_terminal();
    notices.quit_after_signal(
        &format!("quit; continue with: {hint}"),
        second == Stop::Interrupt,
        i32::from(second.exit_code()),
    );
}

/// The next signal to arrive; `None` when none can.
async fn next(listeners: &mut [(Stop, Signal)]) -> Option<Stop> {
    let mut any: FuturesUnordered<_> = listeners
        .iter_mut()
        .map(|(stop, listener)| async move { listener.recv().await.map(|()| *stop) })
        .collect();
    while let Some(arrived) = any.next().await {
        if arrived.is_some() {
            return arrived;
        }
    }
    None
}

/// Whether `signal` is ignored (`SIG_IGN`) in this process now. Read before this module listens
/// for it, that is how the process was started: once tokio listens, it never is again.
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is a valid value of this plain C struct; sigaction(2) with a
    // null new action only writes the current one into `old`, which lives for the call.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    read == 0 && old.sa_sigaction == libc::SIG_IGN
}

/// Points stdout and stderr, where they are a terminal that hung up (it closed: SIGHUP, or a
/// signal after that), at `/dev/null`. Every write to such a terminal fails: indicatif's
/// `suspend` (in [`Notices`]) panics on it, instead of
/// ending with the signal's exit code.
fn leave_a_hung_up_terminal() {
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        if !hung_up(fd) {
            continue;
        }
        let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
            return;
        };
        // SAFETY: dup2(2) on two open descriptors; `fd` stays open (now on /dev/null), so
        // nothing holding it is left with a closed or reused descriptor.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
}

/// Whether `fd` is a terminal that hung up: asked whether it is a terminal, it answers EIO (a
/// live one answers yes, a file or pipe ENOTTY).
fn hung_up(fd: libc::c_int) -> bool {
    // SAFETY: isatty(3) only queries the descriptor.
    let tty = unsafe { libc::isatty(fd) };
    tty == 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EIO)
}
