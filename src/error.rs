//! The engine's errors: of graphs (what `compile` refuses), of nodes (what a node returns) and
//! of runs (what a caller sees).
//!
//! They sit below `graph` and `runtime` because both speak them: a graph's nodes return
//! [`NodeError`] and its retry policies read it, a subgraph read through a
//! [`SubgraphView`](crate::runtime::SubgraphView) answers with [`RunError`], and a run reports the
//! [`GraphError`] of a name it was given. They name no graph, run or store machinery.
//! Re-exported where users find them: `stategraph::graph::GraphError`,
//! `stategraph::runtime::{NodeError, NodeErrorKind, ResumeError, RunError}`.

use crate::checkpoint::{CheckpointError, CheckpointId, InterruptRecord};
use crate::state::MergeError;
use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// A graph that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The graph has problems; each says what to fix.
    #[error("the graph is invalid:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
    /// A name given to the compiled graph (interrupt, node lookup) is not one of its nodes.
    #[error("no node named `{name}` in this graph ({context}); its nodes are: {known}")]
    UnknownNode {
        /// The name given.
        name: String,
        /// Where it was given.
        context: &'static str,
        /// The graph's nodes.
        known: String,
    },
}

/// How a node's attempt ended badly.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeErrorKind {
    /// A failure that retrying will not fix.
    Failed,
    /// A failure that may pass (rate limit, 5xx, connection reset): retried by the default policy.
    Transient,
    /// The attempt ran past the node's timeout.
    Timeout(Duration),
    /// The node's code panicked.
    Panicked,
    /// The node asked a person for input; the run pauses (see [`Context::interrupt`](crate::runtime::Context::interrupt)).
    Interrupted(Box<InterruptRecord>),
    /// A function graph called its durable tasks in another order than its journal recorded
    /// (see [`stategraph::functional`](crate::functional)); never retried.
    NonDeterministic(Box<NonDeterminism>),
}

/// A function graph ([`entrypoint`](crate::functional::entrypoint)) whose re-execution called a
/// different task at a position than the run it resumes: handing it that run's saved result
/// would be a silent wrong answer, so the function is stopped instead.
///
/// ```
/// use stategraph::runtime::NonDeterminism;
/// let e = NonDeterminism {
///     function: "brief".into(),
///     ordinal: 1,
///     recorded: "fetch".into(),
///     called: "draft".into(),
/// };
/// assert!(e.to_string().contains("call 1 is task `draft`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "function `{function}` is not deterministic: on re-execution its call {ordinal} is task \
     `{called}`, but the journal holds task `{recorded}` at that position from an earlier run. \
     A function must call its tasks in the same order on every run (decide from its input, task \
     results and answers, never from time, randomness or the environment); fix the function, \
     or start a new thread, since this one's saved results belong to the old order"
)]
pub struct NonDeterminism {
    /// The function (its graph's name).
    pub function: String,
    /// The task call's position in the function (from 0, in call order).
    pub ordinal: u32,
    /// The task the journal holds at that position.
    pub recorded: String,
    /// The task the function called there now.
    pub called: String,
}

/// The error a node returns.
///
/// Any `std::error::Error` converts into it with `?` (as a non-transient failure, unless it is a
/// model or tool error that says it is transient). Build one by hand with [`NodeError::new`] or
/// [`NodeError::transient`].
///
/// ```
/// use stategraph::runtime::NodeError;
/// fn parse(x: &str) -> Result<u32, NodeError> { Ok(x.parse::<u32>()?) }
/// assert!(parse("x").is_err());
/// assert!(NodeError::transient("rate limited").is_transient());
/// ```
pub struct NodeError {
    kind: NodeErrorKind,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
    /// Every interrupt of a subgraph that paused (the kind holds the first).
    pub(crate) paused: Vec<InterruptRecord>,
    /// Where inside a subgraph the failure happened (`review > ask`), for the run's error.
    pub(crate) inner_path: Option<String>,
}

impl NodeError {
    /// A failure that retrying will not fix.
    pub fn new(message: impl Into<String>) -> Self {
        NodeError {
            kind: NodeErrorKind::Failed,
            message: message.into(),
            source: None,
            paused: Vec::new(),
            inner_path: None,
        }
    }

    /// A failure worth retrying.
    pub fn transient(message: impl Into<String>) -> Self {
        NodeError {
            kind: NodeErrorKind::Transient,
            message: message.into(),
            source: None,
            paused: Vec::new(),
            inner_path: None,
        }
    }

    /// Wraps an error, marking it transient or not.
    pub fn wrap(error: impl StdError + Send + Sync + 'static, transient: bool) -> Self {
        NodeError {
            kind: if transient {
                NodeErrorKind::Transient
            } else {
                NodeErrorKind::Failed
            },
            message: error.to_string(),
            source: Some(Box::new(error)),
            paused: Vec::new(),
            inner_path: None,
        }
    }

    pub(crate) fn with_kind(kind: NodeErrorKind, message: impl Into<String>) -> Self {
        NodeError {
            kind,
            message: message.into(),
            source: None,
            paused: Vec::new(),
            inner_path: None,
        }
    }

    /// How the attempt ended.
    pub fn kind(&self) -> &NodeErrorKind {
        &self.kind
    }

    /// What went wrong, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, if one was wrapped.
    pub fn source(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        self.source.as_deref()
    }

    /// True for failures the default retry policy retries: transient errors and timeouts.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            NodeErrorKind::Transient | NodeErrorKind::Timeout(_)
        )
    }

    /// True when the node paused for a person rather than failing.
    pub fn is_interrupt(&self) -> bool {
        matches!(self.kind, NodeErrorKind::Interrupted(_))
    }
}

impl fmt::Debug for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Errors that know whether they are worth retrying (model and tool clients implement it), so
/// `?` in a node keeps that knowledge.
pub(crate) fn transient_hint(error: &(dyn StdError + 'static)) -> bool {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                TimedOut | ConnectionReset | ConnectionAborted | Interrupted
            ) {
                return true;
            }
        }
        current = e.source();
    }
    false
}

impl<E: StdError + Send + Sync + 'static> From<E> for NodeError {
    fn from(error: E) -> Self {
        let transient = transient_hint(&error);
        NodeError::wrap(error, transient)
    }
}

/// Why answering a paused run failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResumeError {
    /// A value was given, but nothing is waiting for one.
    #[error("thread `{thread}` has no pending interrupt to answer; resume it without a value")]
    NothingToAnswer {
        /// The thread.
        thread: String,
    },
    /// A bare value was given while several interrupts wait.
    #[error(
        "thread `{thread}` has {} pending interrupts ({}); answer them by id, e.g. {{\"{}\": ...}}",
        ids.len(), ids.join(", "), ids.first().map(String::as_str).unwrap_or("id")
    )]
    Ambiguous {
        /// The thread.
        thread: String,
        /// The pending interrupts' ids.
        ids: Vec<String>,
    },
    /// An answer names an interrupt that is not pending.
    #[error("thread `{thread}` has no pending interrupt `{id}`; pending: {}", if pending.is_empty() { "none".to_string() } else { pending.join(", ") })]
    UnknownInterrupt {
        /// The thread.
        thread: String,
        /// The id given.
        id: String,
        /// The pending interrupts' ids.
        pending: Vec<String>,
    },
}

/// Why a run, a resume or a thread operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A node failed after its retries. The thread keeps its last checkpoint and its siblings'
    /// results: resuming runs only the failed task again.
    #[error("node `{node}` failed at step {step} of thread `{thread_id}` after {}: {message}", attempts_text(*attempts))]
    NodeFailed {
        /// The node.
        node: String,
        /// The superstep.
        step: u64,
        /// The thread.
        thread_id: String,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        message: String,
        /// How it failed.
        kind: NodeErrorKind,
    },
    /// The step's updates conflict.
    #[error("step {step} of thread `{thread_id}` wrote conflicting updates: {source}")]
    Merge {
        /// The superstep.
        step: u64,
        /// The thread.
        thread_id: String,
        /// The conflict.
        #[source]
        source: MergeError,
    },
    /// The run took more supersteps than allowed.
    #[error(
        "thread `{thread_id}` reached the recursion limit of {limit} supersteps at step {step} \
         without finishing; the graph may loop forever. If the run is legitimately long, raise \
         its recursion limit (RunConfig::recursion_limit), then resume the thread"
    )]
    RecursionLimit {
        /// The limit.
        limit: u64,
        /// The step reached.
        step: u64,
        /// The thread (it stays resumable).
        thread_id: String,
    },
    /// A router or command chose a destination it did not declare.
    #[error(
        "{from} sent the run to `{target}` at step {step}, which it did not declare (declared: {}); \
         add `{target}` to its declared targets or fix the routing",
        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
    )]
    UndeclaredTarget {
        /// The router or node (e.g. "the router after `plan`").
        from: String,
        /// The target returned.
        target: String,
        /// The declared targets.
        declared: Vec<String>,
        /// The superstep.
        step: u64,
    },
    /// Saving or loading checkpoints failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A thread operation needs a checkpointer and the graph has none.
    #[error(
        "{operation} needs a checkpointer: compile the graph, then call .with_checkpointer(..)"
    )]
    NoCheckpointer {
        /// The operation attempted.
        operation: &'static str,
    },
    /// No such thread.
    #[error("no thread `{thread_id}` in this store; list threads to see which exist")]
    ThreadNotFound {
        /// The thread asked for.
        thread_id: String,
    },
    /// No such checkpoint.
    #[error(
        "thread `{thread_id}` has no checkpoint `{checkpoint}`; see its history for valid ids"
    )]
    CheckpointNotFound {
        /// The thread.
        thread_id: String,
        /// The checkpoint asked for.
        checkpoint: String,
    },
    /// A stored state (or update) does not fit the state type.
    #[error("the stored state of thread `{thread_id}` at checkpoint {checkpoint} does not fit this graph's state type: {message}")]
    StateMismatch {
        /// The thread.
        thread_id: String,
        /// The checkpoint.
        checkpoint: CheckpointId,
        /// What did not fit.
        message: String,
    },
    /// A stored state has another schema version and no migration accepts it.
    #[error(
        "thread `{thread_id}` was saved with state schema version {found} and this graph's state \
         is version {expected}: {message}"
    )]
    SchemaVersion {
        /// The thread.
        thread_id: String,
        /// The version stored.
        found: u32,
        /// The state type's version.
        expected: u32,
        /// Why the migration failed.
        message: String,
    },
    /// A resume value does not fit the pending interrupts.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// Input given to a run or an edit is not valid.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// An edit without `as_node` on a thread whose last step several nodes wrote: which node's
    /// output it stands for is not known, so it is refused and nothing changes.
    #[error(
        "the edit of thread `{thread_id}` is ambiguous: {} wrote last, in the same step; say \
         which node it stands for with as_node",
        nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" and ")
    )]
    AmbiguousEdit {
        /// The thread (or child namespace) edited.
        thread_id: String,
        /// The nodes that wrote last, any of which the edit could stand for.
        nodes: Vec<String>,
    },
    /// A node name or graph option is wrong.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The run was cancelled; the thread keeps its last checkpoint.
    #[error("the run of thread `{thread_id}` was cancelled; its last checkpoint is kept, resume it to continue")]
    Cancelled {
        /// The thread.
        thread_id: String,
    },
    /// The run stopped at a step boundary without ending: drained, or past its run timeout.
    /// The step it stopped after is saved and no later one started, so resuming the thread
    /// continues with `next`, running nothing twice.
    ///
    /// ```
    /// use stategraph::runtime::{RunError, StopReason};
    /// let e = RunError::Stopped {
    ///     thread_id: "nightly".into(),
    ///     step: 3,
    ///     reason: StopReason::Drained,
    ///     next: vec!["review".into()],
    ///     saved: true,
    /// };
    /// assert!(e.to_string().contains("resume the thread to continue"));
    /// ```
    #[error("{}", stopped_text(thread_id, *step, reason, next, *saved))]
    Stopped {
        /// The thread.
        thread_id: String,
        /// The last step done (and saved).
        step: u64,
        /// Why it stopped.
        reason: StopReason,
        /// The nodes a resume runs first.
        next: Vec<String>,
        /// False when the graph has no checkpointer: then nothing of the run was kept.
        saved: bool,
    },
    /// The long-term store refused the writes of a saved step. The step's checkpoint is kept
    /// with its writes beside it: resuming the thread applies them again.
    #[error(
        "the step saved as checkpoint {checkpoint} of thread `{thread_id}` could not write to \
         the long-term store: {source}; its writes are kept with the step, and resuming the \
         thread applies them again"
    )]
    Store {
        /// The thread.
        thread_id: String,
        /// The checkpoint whose writes were not applied.
        checkpoint: crate::checkpoint::CheckpointId,
        /// What the store said.
        #[source]
        source: crate::checkpoint::store::StoreError,
    },
}

/// Why a run stopped at a step boundary ([`RunError::Stopped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Its [`RunControl`](crate::runtime::RunControl) asked for a drain.
    Drained,
    /// It ran past its [`RunConfig::run_timeout`](crate::runtime::RunConfig::run_timeout).
    RunTimeout {
        /// The timeout.
        limit: Duration,
        /// How long the run had run when its step ended.
        elapsed: Duration,
    },
}

/// What [`RunError::Stopped`] says: why, what is kept, and how to continue.
fn stopped_text(
    thread: &str,
    step: u64,
    reason: &StopReason,
    next: &[String],
    saved: bool,
) -> String {
    let why = match reason {
        StopReason::Drained => "was drained".to_string(),
        StopReason::RunTimeout { limit, elapsed } => format!(
            "passed its run timeout of {} (it had run {})",
            duration_text(*limit),
            duration_text(*elapsed)
        ),
    };
    let next = match next {
        [] => String::new(),
        nodes => format!(" (next: {})", nodes.join(", ")),
    };
    if !saved {
        return format!(
            "the run of thread `{thread}` {why} and stopped after step {step}{next}; the graph \
             has no checkpointer, so nothing of it was kept"
        );
    }
    let longer = match reason {
        StopReason::Drained => "",
        StopReason::RunTimeout { .. } => {
            ", giving it a longer RunConfig::run_timeout if it needs more time"
        }
    };
    format!(
        "the run of thread `{thread}` {why}: step {step} is saved and no later step started; \
         resume the thread to continue{next}{longer}"
    )
}

impl RunError {
    /// The thread the error concerns, when it concerns one run.
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            RunError::NodeFailed { thread_id, .. }
            | RunError::Merge { thread_id, .. }
            | RunError::RecursionLimit { thread_id, .. }
            | RunError::ThreadNotFound { thread_id }
            | RunError::CheckpointNotFound { thread_id, .. }
            | RunError::StateMismatch { thread_id, .. }
            | RunError::SchemaVersion { thread_id, .. }
            | RunError::Cancelled { thread_id }
            | RunError::Stopped { thread_id, .. }
            | RunError::Store { thread_id, .. } => Some(thread_id),
            _ => None,
        }
    }
}

/// `1 attempt`, `3 attempts`.
fn attempts_text(attempts: u32) -> String {
    match attempts {
        1 => "1 attempt".to_string(),
        n => format!("{n} attempts"),
    }
}

/// A duration as people read it: `300ms`, `2.5s`, `1m 30s`, `10m`, `2h 5m`.
pub(crate) fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        1..=59 if d.subsec_millis() == 0 => format!("{secs}s"),
        1..=59 => format!("{:.1}s", d.as_secs_f64()),
        60..=3599 => match secs % 60 {
            0 => format!("{}m", secs / 60),
            s => format!("{}m {s}s", secs / 60),
        },
        _ => match (secs % 3600) / 60 {
            0 => format!("{}h", secs / 3600),
            m => format!("{}h {m}m", secs / 3600),
        },
    }
}
