//! The stream of events a run emits.

use crate::checkpoint::InterruptRecord;
use serde::Serialize;
use tokio::sync::mpsc;

/// The [`Event::Custom`] kind of streamed model text ([`Context::text_sink`](super::Context::text_sink)).
pub const TOKEN_EVENT: &str = "token";

/// The [`Event::Custom`] kind of a one-line progress report whose payload is the line, e.g.
/// `stage 3 of 13 · section_research · 0.02s`. The `graph` command prints each as it comes.
pub const PROGRESS_EVENT: &str = "progress";

/// Something that happened during a run, in the order it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run began (or resumed) on a thread.
    RunStarted {
        /// The thread.
        thread_id: String,
        /// This run's id.
        run_id: String,
        /// The step it starts after.
        step: u64,
    },
    /// A task began an attempt.
    NodeStarted {
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The task's position in the step.
        task: usize,
        /// Attempt number, from 1.
        attempt: u32,
    },
    /// A task finished.
    NodeFinished {
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The task's position in the step.
        task: usize,
        /// How long it took, all attempts included, in milliseconds.
        duration_ms: f64,
        /// The update it made, as JSON.
        update: serde_json::Value,
    },
    /// A task's attempt failed.
    NodeFailed {
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The attempt that failed.
        attempt: u32,
        /// What went wrong.
        error: String,
        /// Whether another attempt follows.
        will_retry: bool,
    },
    /// A node emitted an event of its own (progress, model tokens...).
    Custom {
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The node's name for the event.
        kind: String,
        /// Its payload.
        payload: serde_json::Value,
    },
    /// A checkpoint was saved.
    CheckpointSaved {
        /// Supersteps done.
        step: u64,
        /// The checkpoint.
        checkpoint_id: String,
        /// The nodes that run next.
        next: Vec<String>,
    },
    /// The run paused for a person.
    Interrupted {
        /// Supersteps done.
        step: u64,
        /// What waits for an answer.
        interrupts: Vec<InterruptRecord>,
    },
    /// The run ended (done, paused or failed).
    RunFinished {
        /// Supersteps done.
        step: u64,
        /// "done", "interrupted", "failed" or "cancelled".
        status: String,
    },
}

/// Where a run sends its events; absent when nobody listens, so an unobserved run builds none.
#[derive(Clone, Default)]
pub(crate) struct EventSink(Option<mpsc::UnboundedSender<Event>>);

impl EventSink {
    pub(crate) fn new(tx: mpsc::UnboundedSender<Event>) -> Self {
        EventSink(Some(tx))
    }

    pub(crate) fn is_active(&self) -> bool {
        self.0.is_some()
    }

    /// Sends the event built by `f`, building it only if someone listens.
    pub(crate) fn emit(&self, f: impl FnOnce() -> Event) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(f());
        }
    }
}
