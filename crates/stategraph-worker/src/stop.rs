//! Stopping a run at a step boundary. A queued run asked to stop (cancelled, interrupted,
//! rolled back, or its worker draining) must finish the step it is in and save it, and start no
//! other: the engine's [`RunControl`] does exactly that (`request_drain`, read between steps),
//! so a stop asked is a drain of the run, which ends with `RunError::Stopped`
//! (`StopReason::Drained`); `exec.rs` then records why it was asked. A run this worker lost
//! (its lease taken over) is different: it must stop at once, mid-step, so it is cancelled with
//! its token, abandoning the step in flight.

use stategraph::runtime::RunControl;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Why a run is to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The queue asked (see [`Stop`](stategraph_postgres::queue::Stop)).
    Queue(stategraph_postgres::queue::Stop),
    /// The worker drains: the run goes back to the queue.
    Drain,
}

/// A run's stop: asked (to take effect at the next boundary) or forced (at once).
#[derive(Clone, Default)]
pub(crate) struct StopSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// Drains the run at its next step boundary.
    control: RunControl,
    /// Cancels the run mid-step: only for a run no longer this worker's.
    token: CancellationToken,
    asked: Mutex<Option<Why>>,
    lost: std::sync::atomic::AtomicBool,
}

impl StopSignal {
    /// The control the run is drained with.
    pub(crate) fn control(&self) -> &RunControl {
        &self.0.control
    }

    /// The token the run is abandoned with.
    pub(crate) fn token(&self) -> CancellationToken {
        self.0.token.clone()
    }

    /// Asks the run to stop at its next step boundary. The queue's stop outranks a drain: a
    /// run cancelled while its worker drains ends cancelled, not queued again.
    pub(crate) fn ask(&self, why: Why) {
        {
            let mut asked = self.0.asked.lock().unwrap_or_else(|p| p.into_inner());
            match (*asked, why) {
                (Some(Why::Queue(_)), Why::Drain) => {}
                _ => *asked = Some(why),
            }
        }
        // After the reason is stored: the run, once stopped, reads why.
        self.0.control.request_drain();
    }

    /// Why the run was asked to stop, if it was.
    pub(crate) fn asked(&self) -> Option<Why> {
        *self.0.asked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run is no longer this worker's: it stops at once, mid-step.
    pub(crate) fn abandon(&self) {
        self.0.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.token.cancel();
    }

    /// Whether the run was abandoned.
    pub(crate) fn lost(&self) -> bool {
        self.0.lost.load(std::sync::atomic::Ordering::SeqCst)
    }
}
