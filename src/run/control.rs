//! Stopping a run from outside it, and a node's sign of life.
//!
//! - [`RunControl`]: a handle a caller keeps while a run goes on; [`RunControl::request_drain`]
//!   lets the step in flight finish and be saved, then the run stops before its next step
//!   (`RunError::Stopped` with [`StopReason::Drained`](crate::error::StopReason::Drained)).
//!   The runtime reads it at each step boundary (`runtime/timeouts.rs`), where a run timeout is
//!   read too: both stop a run the same way.
//! - [`Heartbeat`]: when a task last showed progress, read by the watchdog of a node with an
//!   idle timeout. A task of a subgraph beats its parent's task too, so a node that runs a
//!   busy subgraph is not taken for a silent one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A handle to a run, kept by whoever started it, to stop it at a step boundary.
///
/// Give a clone to the run with [`RunConfig::control`](crate::run::config::RunConfig::control)
/// (or take the one of a stream, [`RunStream::control`](crate::runtime::RunStream::control)).
/// [`request_drain`](Self::request_drain) lets the step in flight finish, saves it, and starts
/// no new step: the run ends with `RunError::Stopped` whose reason is
/// [`StopReason::Drained`](crate::error::StopReason::Drained), and resuming the thread
/// continues with the step that did not start. Unlike a cancellation
/// ([`RunConfig::cancel_on`](crate::run::config::RunConfig::cancel_on)), nothing a node did is
/// abandoned. A drain asked for after the run ended does nothing; one asked for before it
/// started stops it before its first step (its input, if any, is saved).
///
/// ```
/// use stategraph::runtime::{RunConfig, RunControl};
/// let control = RunControl::new();
/// let config = RunConfig::new().thread("nightly").control(&control);
/// // Later, from a signal handler or another task:
/// control.request_drain();
/// assert!(control.drain_requested());
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct RunControl {
    drain: Arc<AtomicBool>,
}

impl RunControl {
    /// A handle no run listens to yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop at its next step boundary: the step in flight finishes and is
    /// saved, no new one starts. Asking again does nothing more.
    ///
    /// ```
    /// let control = stategraph::runtime::RunControl::new();
    /// control.request_drain();
    /// control.request_drain();
    /// assert!(control.drain_requested());
    /// ```
    pub fn request_drain(&self) {
        self.drain.store(true, Ordering::SeqCst);
    }

    /// Whether a drain was asked for.
    ///
    /// ```
    /// assert!(!stategraph::runtime::RunControl::new().drain_requested());
    /// ```
    pub fn drain_requested(&self) -> bool {
        self.drain.load(Ordering::SeqCst)
    }
}

/// When a task last showed progress: at each attempt's start, at each
/// [`Context::heartbeat`](crate::run::context::Context::heartbeat), at each event it emits. Only
/// tasks watched for idleness (theirs, or a parent task's) carry one, so the others pay
/// nothing.
#[derive(Clone, Debug)]
pub(crate) struct Heartbeat {
    inner: Arc<Beats>,
}

#[derive(Debug)]
struct Beats {
    /// What `last` counts from.
    origin: Instant,
    /// Milliseconds from `origin` to the last beat.
    last: AtomicU64,
    /// The silence after which the task's attempt is cancelled; `None` for a task that only
    /// passes its beats on to its parent's.
    idle: Option<Duration>,
    /// The task that runs this one's graph as a subgraph, when that one is watched.
    parent: Option<Heartbeat>,
}

impl Heartbeat {
    /// The heartbeat of a task: its own when its node has an idle timeout, else its parent's
    /// (so its beats reach the watched task), else none.
    pub(crate) fn for_task(idle: Option<Duration>, parent: Option<Heartbeat>) -> Option<Self> {
        match idle {
            Some(idle) => Some(Heartbeat {
                inner: Arc::new(Beats {
                    origin: Instant::now(),
                    last: AtomicU64::new(0),
                    idle: Some(idle),
                    parent,
                }),
            }),
            None => parent,
        }
    }

    /// A sign of life, passed up to the tasks that run this one's graph.
    pub(crate) fn beat(&self) {
        let mut current = Some(self);
        while let Some(beats) = current {
            let inner = &beats.inner;
            let now = inner.origin.elapsed().as_millis() as u64;
            inner.last.fetch_max(now, Ordering::Relaxed);
            current = inner.parent.as_ref();
        }
    }

    /// How long the task has been silent.
    pub(crate) fn silence(&self) -> Duration {
        let now = self.inner.origin.elapsed();
        let last = Duration::from_millis(self.inner.last.load(Ordering::Relaxed));
        now.saturating_sub(last)
    }

    /// The shortest idle timeout of the tasks this one's beats reach: how often a beat must
    /// come for none of them to be taken for silent.
    pub(crate) fn idle(&self) -> Option<Duration> {
        let mut shortest: Option<Duration> = None;
        let mut current = Some(self);
        while let Some(beats) = current {
            if let Some(idle) = beats.inner.idle {
                shortest = Some(shortest.map_or(idle, |s| s.min(idle)));
            }
            current = beats.inner.parent.as_ref();
        }
        shortest
    }
}
