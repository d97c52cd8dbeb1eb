//! The stream of events a run emits.

use crate::checkpoint::InterruptRecord;
use serde::Serialize;
use tokio::sync::mpsc;

/// The [`Event::Custom`] kind of streamed model text ([`Context::text_sink`](crate::run::context::Context::text_sink)).
pub const TOKEN_EVENT: &str = "token";

/// The [`Event::Custom`] kind of a one-line progress report whose payload is the line, e.g.
/// `stage 3 of 13 · section_research · 0.02s`. The `graph` command prints each as it comes.
pub const PROGRESS_EVENT: &str = "progress";

/// The node name of an [`Event::Updates`] that reports a pause (LangGraph's key for it).
pub const INTERRUPT: &str = "__interrupt__";

/// Something that happened during a run, in the order it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run began (or resumed) on a thread.
    RunStarted {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// The thread.
        thread_id: String,
        /// This run's id.
        run_id: String,
        /// The step it starts after.
        step: u64,
    },
    /// A task began an attempt.
    NodeStarted {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
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
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
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
        /// True when the update came from the node cache and the node did not run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cached: bool,
    },
    /// A task's attempt failed.
    NodeFailed {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The task's position in the step (which of a node's parallel tasks failed).
        #[serde(default)]
        task: usize,
        /// The attempt that failed.
        attempt: u32,
        /// What went wrong.
        error: String,
        /// Whether another attempt follows.
        will_retry: bool,
    },
    /// A node emitted an event of its own (progress, model tokens...).
    Custom {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
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
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// Supersteps done.
        step: u64,
        /// The checkpoint.
        checkpoint_id: String,
        /// The nodes that run next.
        next: Vec<String>,
    },
    /// The run paused for a person.
    Interrupted {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// Supersteps done.
        step: u64,
        /// What waits for an answer.
        interrupts: Vec<InterruptRecord>,
    },
    /// The whole state, in stream mode `values`, as LangGraph streams it: after an input or a
    /// step that wrote it (an empty input shows nothing), first of all when a run resumes (the
    /// state it resumes from), and when tasks pause for a person (the state with the step's
    /// finished results merged, and `interrupts`; a static breakpoint shows no new state).
    Values {
        /// The subgraph (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// Supersteps done.
        step: u64,
        /// The state, as JSON.
        values: serde_json::Value,
        /// What waits for an answer, when the run paused here (LangGraph's `__interrupt__`
        /// key beside the state).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupts: Vec<InterruptRecord>,
    },
    /// One task's update, at the end of its step, in task order (stream mode `updates`). A
    /// pause is one of these too, as LangGraph's `{"__interrupt__": [...]}`: `node` is
    /// [`INTERRUPT`] and `update` the list of what waits, one event per task that paused
    /// (`task` its position), or one for a static breakpoint's tasks.
    Updates {
        /// The subgraph (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The task's position in the step.
        task: usize,
        /// The update, as JSON.
        update: serde_json::Value,
        /// True when the update came from the node cache and the node did not run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cached: bool,
    },
    /// A piece of a model's reply as it arrives (stream mode `messages`): what a node sent to
    /// its [`Context::text_sink`](crate::run::context::Context::text_sink) of kind [`TOKEN_EVENT`].
    Message {
        /// The subgraph (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// The superstep.
        step: u64,
        /// The node.
        node: String,
        /// The text.
        text: String,
    },
    /// The run ended (done, paused or failed).
    RunFinished {
        /// The subgraph it happened in (below the root thread); empty for the root graph.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        namespace: String,
        /// Supersteps done.
        step: u64,
        /// "done", "interrupted", "failed" or "cancelled".
        status: String,
    },
}

/// What a stream asks for. With no mode, a stream gets the run's lifecycle and custom events
/// of the root graph as they happen (what `graph run` shows); with modes, exactly those, from
/// every level of subgraph, each event naming its namespace.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum StreamMode {
    /// [`Event::Values`]: the whole state after each step.
    Values,
    /// [`Event::Updates`]: each task's update, in task order at the end of its step.
    Updates,
    /// [`Event::Message`]: model tokens as they arrive.
    Messages,
    /// [`Event::Custom`]: what nodes send with [`Context::emit`](crate::run::context::Context::emit).
    Custom,
    /// Task start (before the step, in task order), task result (after it, in task order:
    /// [`Event::NodeFinished`] or [`Event::NodeFailed`]), checkpoints, pauses, run start and end.
    Debug,
}

impl std::str::FromStr for StreamMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "values" => Ok(StreamMode::Values),
            "updates" => Ok(StreamMode::Updates),
            "messages" => Ok(StreamMode::Messages),
            "custom" => Ok(StreamMode::Custom),
            "debug" => Ok(StreamMode::Debug),
            other => Err(format!(
                "unknown stream mode `{other}`: use values, updates, messages, custom or debug"
            )),
        }
    }
}

impl Event {
    /// The subgraph it happened in (below the root thread); empty for the root graph.
    pub fn namespace(&self) -> &str {
        match self {
            Event::RunStarted { namespace, .. }
            | Event::NodeStarted { namespace, .. }
            | Event::NodeFinished { namespace, .. }
            | Event::NodeFailed { namespace, .. }
            | Event::Custom { namespace, .. }
            | Event::CheckpointSaved { namespace, .. }
            | Event::Interrupted { namespace, .. }
            | Event::RunFinished { namespace, .. }
            | Event::Values { namespace, .. }
            | Event::Updates { namespace, .. }
            | Event::Message { namespace, .. } => namespace,
        }
    }

    fn set_namespace(&mut self, ns: &str) {
        match self {
            Event::RunStarted { namespace, .. }
            | Event::NodeStarted { namespace, .. }
            | Event::NodeFinished { namespace, .. }
            | Event::NodeFailed { namespace, .. }
            | Event::Custom { namespace, .. }
            | Event::CheckpointSaved { namespace, .. }
            | Event::Interrupted { namespace, .. }
            | Event::RunFinished { namespace, .. }
            | Event::Values { namespace, .. }
            | Event::Updates { namespace, .. }
            | Event::Message { namespace, .. } => *namespace = ns.to_string(),
        }
    }
}

/// Which events a sink passes on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    values: bool,
    updates: bool,
    messages: bool,
    custom: bool,
    debug: bool,
}

impl Modes {
    pub(crate) fn of(modes: &std::collections::BTreeSet<StreamMode>) -> Self {
        let has = |m| modes.contains(&m);
        Modes {
            values: has(StreamMode::Values),
            updates: has(StreamMode::Updates),
            messages: has(StreamMode::Messages),
            custom: has(StreamMode::Custom),
            debug: has(StreamMode::Debug),
        }
    }

    fn legacy(&self) -> bool {
        *self == Modes::default()
    }
}

/// Where a run sends its events; absent when nobody listens, so an unobserved run builds none.
/// A subgraph's run sends into its parent's sink, under its namespace.
#[derive(Clone, Default)]
pub(crate) struct EventSink {
    tx: Option<mpsc::UnboundedSender<Event>>,
    modes: Modes,
    namespace: std::sync::Arc<str>,
}

impl EventSink {
    pub(crate) fn new(tx: mpsc::UnboundedSender<Event>, modes: Modes) -> Self {
        EventSink {
            tx: Some(tx),
            modes,
            namespace: "".into(),
        }
    }

    /// The sink of a subgraph run under the namespace `namespace()` writes, which is only
    /// written when someone listens: an unobserved child run builds no namespace text.
    pub(crate) fn nested(&self, namespace: impl FnOnce() -> String) -> Self {
        if self.tx.is_none() {
            return EventSink::default();
        }
        EventSink {
            tx: self.tx.clone(),
            modes: self.modes,
            namespace: namespace().into(),
        }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.tx.is_some()
    }

    fn send(&self, f: impl FnOnce() -> Event) {
        if let Some(tx) = &self.tx {
            let mut event = f();
            if !self.namespace.is_empty() {
                event.set_namespace(&self.namespace);
            }
            let _ = tx.send(event);
        }
    }

    fn root_legacy(&self) -> bool {
        self.tx.is_some() && self.modes.legacy() && self.namespace.is_empty()
    }

    /// A lifecycle event (run start and end, checkpoints, pauses): for the root's plain stream
    /// and the debug mode.
    pub(crate) fn emit(&self, f: impl FnOnce() -> Event) {
        if self.root_legacy() || self.modes.debug {
            self.send(f);
        }
    }

    /// A task event as it happens (attempt started, finished, failed): the plain stream only;
    /// the debug mode gets task events in task order instead ([`EventSink::ordered`]).
    pub(crate) fn live(&self, f: impl FnOnce() -> Event) {
        if self.root_legacy() {
            self.send(f);
        }
    }

    /// True when task events in task order are wanted (debug mode).
    pub(crate) fn wants_ordered(&self) -> bool {
        self.tx.is_some() && self.modes.debug
    }

    /// A task event in task order (debug mode).
    pub(crate) fn ordered(&self, f: impl FnOnce() -> Event) {
        if self.modes.debug {
            self.send(f);
        }
    }

    /// True when the whole state after each step is wanted.
    pub(crate) fn wants_values(&self) -> bool {
        self.tx.is_some() && self.modes.values
    }

    /// True when each task's update is wanted.
    pub(crate) fn wants_updates(&self) -> bool {
        self.tx.is_some() && self.modes.updates
    }

    pub(crate) fn values(&self, f: impl FnOnce() -> Event) {
        if self.modes.values {
            self.send(f);
        }
    }

    pub(crate) fn updates(&self, f: impl FnOnce() -> Event) {
        if self.modes.updates {
            self.send(f);
        }
    }

    /// True when a node's text pieces or custom events reach someone.
    pub(crate) fn wants_custom(&self) -> bool {
        self.root_legacy() || (self.tx.is_some() && (self.modes.custom || self.modes.messages))
    }

    /// A node's own event: the plain stream and the custom mode get it as is; the messages mode
    /// gets token pieces as [`Event::Message`].
    pub(crate) fn custom(
        &self,
        step: u64,
        node: &str,
        kind: &str,
        payload: impl FnOnce() -> serde_json::Value,
    ) {
        if !self.wants_custom() {
            return;
        }
        let token = kind == TOKEN_EVENT;
        if self.modes.messages && token {
            let payload = payload();
            self.send(|| Event::Message {
                namespace: String::new(),
                step,
                node: node.to_string(),
                text: payload.as_str().unwrap_or_default().to_string(),
            });
            return;
        }
        if self.root_legacy() || self.modes.custom {
            self.send(|| Event::Custom {
                namespace: String::new(),
                step,
                node: node.to_string(),
                kind: kind.to_string(),
                payload: payload(),
            });
        }
    }
}
