//! Stopping a run from outside. Ctrl+C (SIGINT) and SIGHUP (the terminal closed) stop it at
//! once: the step in flight is abandoned, the last checkpoint is kept (the runtime flushes what
//! async durability still queued). SIGTERM (what `kill`, `docker stop`, systemd and CI runners
//! send to end a process in order) drains it, through the library's
//! [`RunControl`](stategraph::runtime::RunControl): the step in flight finishes and is saved,
//! no new step starts. Either way the command ends with the signal's conventional exit code
//! (128 + its number) after saying how to continue. A second signal quits at once.
//!
//! A `--stream` run whose stdout closed (`graph run ... --stream updates | head -1`) stops the
//! same way as soon as its reader is gone (`output::reader_gone`, else at its next event's
//! failed write), and ends with 141, the code a shell shows for a tool that
//! SIGPIPE killed: the events are what the command was asked for and nobody reads them any
//! more. Running on to the end would keep the pipeline (and the terminal it runs in) waiting on
//! a run whose output goes nowhere, spending on model calls meanwhile; stopped, the thread
//! resumes where it was (`output.rs` says what a closed stdout does elsewhere).
//!
//! A signal that arrives after the run ended (its result in hand, its checkpoints saved), while
//! the command finishes up (the last artifacts, the graph's verdict, letting the thread go, the
//! report, closing the store), is neither swallowed nor allowed to cut that short. Finishing
//! takes a moment, and cut short it could leave the thread's index saying "running" or the
//! last artifacts unwritten. So the command says at once that it heard it, finishes, and then
//! ends with the signal's code, as a process told to stop does; a second signal quits at once.
//! (A signal handler, once installed, stays: without a watcher until the command's end, such a
//! signal was silently ignored and the command exited 0.)
//!
//! A signal that arrives before the run started (while the command resolves its graph, reads
//! its input, takes its thread) stops it the same way: said at once, then the run never starts
//! and its thread is left as it was. A wait for a thread that another process holds without
//! serving it (the folder store waits a few seconds for it) ends at once ([`Stops::unless_stopped`]). A new run's thread is not made, or, when it was already
//! made, not kept (it has no checkpoint); a resume's or a rerun's thread keeps what it had.
//! The command says so, with the command that continues the thread, and ends with the
//! signal's code; a second signal quits at once. The signals are heard from the start of the
//! command: their handlers ([`Stops::hear`]) are in place right after its command line is
//! read, before the async runtime starts, and keep what arrives for the watcher task, so none
//! keeps its default effect (which ended the process wherever it was, with a thread made and no
//! checkpoint in it, listed as damaged). Only a signal that comes while the process is still
//! being loaded ends it so; it has made nothing.
//! A second signal still quits at once, wherever the command is: a new run's thread made but
//! not yet written is then left as a folder marked new (`checkpoint/folders/layout.rs`), which
//! no command takes for a thread and the next run of its id takes over, as after a `kill -9`.
//!
//! A signal the process was started ignoring (`nohup`, a script's background job for SIGINT)
//! stays ignored: the one who started it asked for the run to outlive it.

use crate::error::{EXIT_BROKEN_PIPE, EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED};
use crate::progress::Notices;
use stategraph::runtime::RunControl;
use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What stops a run: a signal, or the reader of its `--stream` going away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGINT: Ctrl+C typed at the terminal.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP: the terminal closed.
    Hangup,
    /// A `--stream` run's stdout closed (its reader went away).
    ClosedStdout,
}

impl Stop {
    /// The signals a run listens for.
    const SIGNALS: [Stop; 3] = [Stop::Interrupt, Stop::Terminate, Stop::Hangup];

    fn number(self) -> libc::c_int {
        match self {
            Stop::Interrupt => libc::SIGINT,
            Stop::Terminate => libc::SIGTERM,
            Stop::Hangup => libc::SIGHUP,
            Stop::ClosedStdout => libc::SIGPIPE,
        }
    }

    /// The exit code of a command it stopped: 128 + the signal's number, as a shell reports a
    /// process the signal ended (SIGPIPE's for a closed stdout).
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => EXIT_INTERRUPTED,
            Stop::Terminate => EXIT_TERMINATED,
            Stop::Hangup => EXIT_HANGUP,
            Stop::ClosedStdout => EXIT_BROKEN_PIPE,
        }
    }

    /// How a person names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "Ctrl+C",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
            Stop::ClosedStdout => "stdout closed",
        }
    }

    /// Whether the terminal echoed it (`^C`).
    fn typed(self) -> bool {
        self == Stop::Interrupt
    }

    /// What is said when it comes before the run started.
    fn not_starting_text(self) -> String {
        let on = match self {
            Stop::Interrupt => String::new(),
            other => format!(" on {}", other.name()),
        };
        format!(
            "stopping{on}: the run has not started and will not ({} again quits at once)",
            self.name()
        )
    }

    /// What is said when it stops a running run.
    fn stopping_text(self) -> String {
        let kept = "the step in flight is abandoned, the last checkpoint is kept";
        match self {
            Stop::Terminate => format!(
                "draining on {0}: the step in flight finishes and is saved, no new step starts \
                 ({0} again quits at once)",
                self.name()
            ),
            Stop::Interrupt => format!("stopping: {kept} (Ctrl+C again quits at once)"),
            Stop::ClosedStdout => {
                format!("stopping: stdout was closed (its reader went away): {kept} (Ctrl+C quits at once)")
            }
            other => format!(
                "stopping on {0}: {kept} ({0} again quits at once)",
                other.name()
            ),
        }
    }
}

/// What stops the command's run, from its start to the command's end: the signals (a watcher
/// task), a closed stdout (reported by the run's follower), and which came first. Held by the
/// command's [`Ctx`](crate::Ctx), whose end asks it for the exit code
/// ([`Stops::finish`]).
#[derive(Default)]
pub(crate) struct Stops {
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The signal handlers (see [`Stops::hear`]), removed at the end.
    handlers: Mutex<Vec<signal_hook_registry::SigId>>,
    /// Whether the handlers are in place.
    hearing: AtomicBool,
    /// The end of the handlers' socket the watcher task reads, until it takes it.
    heard: Mutex<Option<UnixStream>>,
}

#[derive(Default)]
struct Shared {
    /// The first stop the command got, as the watcher task took it in.
    first: OnceLock<Stop>,
    /// The number of the first signal that reached the process, written by the signal handler
    /// itself; 0 for none.
    delivered: AtomicI32,
    /// The end of the handlers' socket they write each signal's number to.
    told: OnceLock<OwnedFd>,
    /// Set once the run ended: a stop then no longer cancels anything.
    ended: AtomicBool,
    /// The command's run's: cancelled by the first stop that comes before the run ended, also
    /// one that comes before the run started; but SIGTERM drains a running run instead.
    token: CancellationToken,
    /// The command's run's drain: SIGTERM (what `docker stop`, systemd and CI runners send
    /// to end a process in order) lets the step in flight finish and be saved, the library's
    /// drain, so stopping a service never throws away a step's work.
    control: RunControl,
    /// The run being watched, once it is about to start; `None` before.
    run: Mutex<Option<Watched>>,
}

/// What a stop needs of the run it stops.
#[derive(Clone)]
struct Watched {
    /// The command that continues the thread.
    hint: String,
    /// Where to say things while its progress lines may be on the screen.
    notices: Notices,
}

impl Stops {
    /// Hears each signal the process was not started ignoring from now on: a handler notes it
    /// and writes its number to a socket, where the watcher task ([`Stops::listen`]) finds it,
    /// however long before that task starts it came. Needs no async runtime, so a command that
    /// runs a graph calls it first thing: no signal keeps its default effect, which ended the
    /// process wherever it was (with a thread made and no checkpoint in it, say). Handlers,
    /// not a blocked signal mask: the commands a graph runs inherit the mask of the thread that
    /// starts them, and must hear these signals. Once is enough; later calls do nothing.
    pub(crate) fn hear(&self) {
        if self.hearing.swap(true, Ordering::SeqCst) {
            return;
        }
        let (heard, told) = match UnixStream::pair() {
            Ok(pair) => pair,
            Err(e) => {
                // The signals keep their default effect.
                tracing::warn!(error = %e, "cannot listen for signals");
                return;
            }
        };
        // The handler's write never waits: a full socket already holds a second signal.
        let _ = told.set_nonblocking(true);
        let _ = self.shared.told.set(OwnedFd::from(told));
        // signal-hook-registry puts each handler in place before it publishes the action that
        // handler runs, and a signal in between is lost: neither its default effect nor ours
        // (a SIGHUP that a resume never heard, once, in CI). Held back meanwhile, it is
        // delivered once all are in place.
        let held = HeldBack::start();
        for stop in Stop::SIGNALS {
            let number = stop.number();
            if ignored(number) {
                continue;
            }
            let shared = self.shared.clone();
            // SAFETY: the action runs inside the signal handler; it only does a
            // compare-exchange on an atomic and a write(2) of one byte to a socket, both
            // async-signal-safe (no allocation, no lock), on what the `Arc` keeps alive.
            let registered = unsafe {
                signal_hook_registry::register(number, move || {
                    let _ = (shared.delivered).compare_exchange(
                        0,
                        number,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                    if let Some(fd) = shared.told.get() {
                        let byte = number as u8;
                        libc::write(fd.as_raw_fd(), (&byte as *const u8).cast(), 1);
                    }
                })
            };
            match registered {
                Ok(id) => lock(&self.handlers).push(id),
                // The run goes on; the signal keeps its default effect.
                Err(e) => {
                    tracing::warn!(signal = stop.name(), error = %e, "cannot listen for a signal")
                }
            }
        }
        drop(held);
        *lock(&self.heard) = Some(heard);
    }

    /// Starts the watcher task (hearing first, if nothing did), before there is a run: a stop
    /// then means the run never starts (see [`Stops::stopped`]). Signals that came since
    /// [`Stops::hear`] are taken in now. Needs the async runtime. Once is enough.
    pub(crate) fn listen(&self) {
        self.hear();
        let mut task = lock(&self.task);
        if task.is_some() {
            return;
        }
        let Some(heard) = lock(&self.heard).take() else {
            return;
        };
        let heard = heard
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixStream::from_std(heard));
        match heard {
            Ok(heard) => *task = Some(tokio::spawn(watch(heard, self.shared.clone()))),
            Err(e) => tracing::warn!(error = %e, "cannot watch for signals"),
        }
    }

    /// The run is about to start: a stop from now on prints through `notices` (not to stderr
    /// directly, so the live progress lines stay right) and cancels the run through the token
    /// returned; a second one quits at once, printing `hint`. Listens first if nothing did.
    /// A stop that came before is not undone: the caller asks [`Stops::stopped`] before it
    /// starts the run.
    pub(super) fn watch(&self, hint: String, notices: Notices) -> CancellationToken {
        self.listen();
        *lock(&self.shared.run) = Some(Watched { hint, notices });
        self.shared.ended.store(false, Ordering::SeqCst);
        self.shared.token.clone()
    }

    /// The run's drain, which a SIGTERM during the run asks for.
    pub(super) fn control(&self) -> RunControl {
        self.shared.control.clone()
    }

    /// What stopped the command so far, if anything did. Asked before the thread is taken and
    /// again right before the run starts: a run stopped before it started is never started, and
    /// its thread is left as it was (a new run's thread not made, or not kept). Starting it
    /// cancelled would be worse: the runtime heeds its token only while tasks run, so a new
    /// run would save its input checkpoint and a resume its answer (changes the person who
    /// stopped it did not want), and a node ready at once could even run.
    pub(super) fn stopped(&self) -> Option<Stop> {
        self.shared.first.get().copied()
    }

    /// `work` (reading or taking the thread before the run, which waits up to seconds for a
    /// process that holds it without serving it), unless a stop comes first: then `work` is
    /// dropped where it waits and the stop returned, and the command ends now, not when the
    /// wait would have. Dropped while it waits, a read or a take of the folder store has taken
    /// nothing (`checkpoint/folders/take.rs`). A stop that came before returns at once, without
    /// starting `work`.
    pub(super) async fn unless_stopped<T>(&self, work: impl Future<Output = T>) -> Result<T, Stop> {
        let token = self.shared.token.clone();
        let mut work = std::pin::pin!(work);
        tokio::select! {
            biased;
            () = token.cancelled() => {}
            done = &mut work => return Ok(done),
        }
        // The token is cancelled only after the stop that cancels it was noted.
        match self.stopped() {
            Some(stop) => Err(stop),
            None => Ok(work.await),
        }
    }

    /// The run ended: a signal from now on is heard but cancels nothing (see the module doc).
    /// Says what stopped the run, if anything did. A run can outlive its terminal (closed
    /// without a SIGHUP reaching the run): its report then goes nowhere, rather than panicking
    /// on the first line.
    pub(super) fn run_ended(&self) -> Option<Stop> {
        self.shared.ended.store(true, Ordering::SeqCst);
        leave_a_hung_up_terminal();
        self.shared.first.get().copied()
    }

    /// The running run's stdout closed (a `--stream` run's reader went away): stops it as a
    /// first signal would. Nothing more once it is stopping or has ended.
    pub(super) fn stdout_closed(&self) {
        self.shared.arrived(Stop::ClosedStdout);
    }

    /// Stops watching, at the command's very end; the exit code of the command that would end
    /// with `code`: the code of what stopped it, when something did. A signal can arrive so
    /// late that the watcher task has not run since (the Ctrl+C that kills a `| head` also
    /// unblocks the write waiting on it, and the command ends at once): the handler's own
    /// record of it still sets the code.
    pub(crate) fn finish(&self, code: u8) -> u8 {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
        for id in lock(&self.handlers).drain(..) {
            signal_hook_registry::unregister(id);
        }
        leave_a_hung_up_terminal();
        let delivered = self.shared.delivered.load(Ordering::SeqCst);
        let late = Stop::SIGNALS
            .into_iter()
            .find(|stop| stop.number() == delivered);
        match self.shared.first.get().copied().or(late) {
            Some(stop) => stop.exit_code(),
            None => code,
        }
    }
}

impl Shared {
    /// `stop` arrived: the first stops the run (or, once it ended, is noted), a second signal
    /// quits at once. A closed stdout only ever stops a running run.
    fn arrived(&self, stop: Stop) {
        leave_a_hung_up_terminal();
        // Cloned out: nothing is printed while the lock is held.
        let Some(run) = lock(&self.run).clone() else {
            self.before_the_run(stop);
            return;
        };
        let ended = self.ended.load(Ordering::SeqCst);
        let signal = stop != Stop::ClosedStdout;
        if !signal && ended {
            // The run ended: a closed stdout then only sets the exit code (`output::exit_code`).
            return;
        }
        if self.first.set(stop).is_err() {
            if !signal {
                // Already stopping: only a second signal quits at once.
                return;
            }
            let text = match ended {
                true => "quit; the run had ended, its checkpoints are kept".to_string(),
                false => format!("quit; continue with: {}", run.hint),
            };
            run.notices
                .quit_after_signal(&text, stop.typed(), i32::from(stop.exit_code()));
        }
        if ended {
            let name = stop.name();
            run.notices.after_signal(
                &format!(
                    "{name}: the run had already ended, its checkpoints are kept; finishing up, then exiting with {} ({name} again quits at once)",
                    stop.exit_code()
                ),
                stop.typed(),
            );
            return;
        }
        run.notices
            .after_signal(&stop.stopping_text(), stop.typed());
        // After the notice: the run's report (which follows the cancel) comes below it.
        match stop {
            Stop::Terminate => self.control.request_drain(),
            _ => self.token.cancel(),
        }
    }

    /// A signal before the run is watched (while the command resolves its graph, checks its
    /// input, takes its thread): the first is said at once and the run will not start; the
    /// command goes on to where it asks [`Stops::stopped`] and ends there. A second quits at
    /// once: the run had not started, so nothing of it is lost.
    fn before_the_run(&self, stop: Stop) {
        if stop == Stop::ClosedStdout {
            return;
        }
        let notices = Notices::plain();
        if self.first.set(stop).is_err() {
            notices.quit_after_signal(
                "quit; the run had not started",
                stop.typed(),
                i32::from(stop.exit_code()),
            );
        }
        notices.after_signal(&stop.not_starting_text(), stop.typed());
        self.token.cancel();
    }
}

/// SIGINT, SIGTERM and SIGHUP blocked in the calling thread until dropped, for the moment
/// [`Stops::hear`] puts its handlers in place. It runs before the command starts any thread, so
/// the calling thread is then the process's only one: a signal that comes meanwhile waits for
/// the handlers, and no thread (nor any command a graph runs) inherits the mask.
struct HeldBack {
    /// The thread's mask before, put back on drop; `None` when blocking failed.
    old: Option<libc::sigset_t>,
}

impl HeldBack {
    fn start() -> HeldBack {
        // SAFETY: sigemptyset(3) and sigaddset(3) fill in a sigset_t they are given (zeroed
        // first, a valid value of this plain C type); pthread_sigmask(3) reads `set` and writes
        // `old`, both alive for the calls.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for stop in Stop::SIGNALS {
                libc::sigaddset(&mut set, stop.number());
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            let blocked = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) == 0;
            HeldBack {
                old: blocked.then_some(old),
            }
        }
    }
}

impl Drop for HeldBack {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            // SAFETY: puts back the mask `start` read; pthread_sigmask(3) only reads it. A
            // signal that came meanwhile is delivered, to the handlers now in place, before
            // this returns.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
        }
    }
}

/// A lock that a panic elsewhere does not make unusable: what it guards is replaced whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Passes each signal to `shared` as it arrives (the handlers write its number to `heard`),
/// until none can.
async fn watch(mut heard: tokio::net::UnixStream, shared: Arc<Shared>) {
    use tokio::io::AsyncReadExt;
    let mut numbers = [0u8; 16];
    while let Ok(n @ 1..) = heard.read(&mut numbers).await {
        for number in &numbers[..n] {
            let stop = Stop::SIGNALS
                .into_iter()
                .find(|stop| stop.number() == libc::c_int::from(*number));
            if let Some(stop) = stop {
                shared.arrived(stop);
            }
        }
    }
}

/// Whether `signal` is ignored (`SIG_IGN`) in this process now. Read before [`Stops::hear`]
/// puts its handler in place, that is how the process was started: after that it never is.
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
