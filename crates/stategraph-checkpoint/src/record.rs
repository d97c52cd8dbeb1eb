//! The stored shape of a run: checkpoints, pending writes, leases. This is a long-lived format:
//! fields are only ever added (with serde defaults), and a record that fails to decode is an
//! error, never a default.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

/// A checkpoint's id: a UUID v7, so ids sort in the order they were written.
pub type CheckpointId = Uuid;

/// One saved superstep of a thread.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// The thread this checkpoint belongs to.
    pub thread_id: String,
    /// This checkpoint's id (time-ordered).
    pub id: CheckpointId,
    /// The checkpoint this one continues from; `None` for a thread's first checkpoint.
    pub parent_id: Option<CheckpointId>,
    /// Supersteps run on this thread up to and including this checkpoint.
    pub step: u64,
    /// The state, whole or as the writes applied on top of the parent's state.
    pub state: StateData,
    /// What runs next. Saved only once the frontier has advanced past the step's tasks.
    pub frontier: Frontier,
    /// Who wrote this checkpoint and why.
    pub metadata: CheckpointMetadata,
}

/// How a checkpoint stores its state.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateData {
    /// The whole state, as JSON.
    Snapshot(Box<RawValue>),
    /// The parent's state plus these writes, merged in this (task) order.
    Delta(Vec<NodeWrite>),
}

impl StateData {
    /// True for a whole-state snapshot.
    pub fn is_snapshot(&self) -> bool {
        matches!(self, StateData::Snapshot(_))
    }
}

/// One node's update, as JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeWrite {
    /// The node that wrote it.
    pub node: String,
    /// The update.
    pub update: Box<RawValue>,
}

/// The tasks of the next superstep, and trigger bookkeeping that spans supersteps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Frontier {
    /// The next superstep's tasks, in task order (declaration order, then Send order).
    pub tasks: Vec<TaskSpec>,
    /// Deferred nodes that were triggered and wait until nothing else is pending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
    /// For each join (by its key), the sources that have finished since it last fired.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub joins: std::collections::BTreeMap<String, Vec<String>>,
}

impl Frontier {
    /// The names of the next tasks' nodes, in task order.
    pub fn next_nodes(&self) -> Vec<String> {
        self.tasks.iter().map(|t| t.node.clone()).collect()
    }

    /// True when nothing is left to run.
    pub fn is_done(&self) -> bool {
        self.tasks.is_empty() && self.deferred.is_empty()
    }
}

/// One task of a superstep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The node to run.
    pub node: String,
    /// The Send argument, for a map-reduce invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<serde_json::Value>,
}

/// Why a checkpoint was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The run's input was applied.
    Input,
    /// A superstep of the graph ran.
    Loop,
    /// A person or program edited the state (`update_state`).
    Update,
    /// A new branch started from an older checkpoint.
    Fork,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Input => "input",
            Source::Loop => "loop",
            Source::Update => "update",
            Source::Fork => "fork",
        })
    }
}

/// Facts about a checkpoint, for history and inspection.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Why it was written.
    pub source: Source,
    /// The nodes whose updates it holds, in task order.
    #[serde(default)]
    pub writers: Vec<String>,
    /// When it was written, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The state type's schema version ([`State::VERSION`](crate::State::VERSION)).
    pub schema_version: u32,
    /// The run (one `invoke`/`resume` call) that wrote it.
    pub run_id: String,
    /// The graph's name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<String>,
}

/// A task's result saved against the checkpoint it started from, before the checkpoint that
/// supersedes it exists. On resume, tasks with a saved update are not run again.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task's position in the frontier.
    pub task: usize,
    /// The task's node.
    pub node: String,
    /// What the task produced.
    pub kind: PendingKind,
}

/// What a task produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// It finished: its update and extra destinations.
    Update {
        /// The update, as JSON.
        update: Box<RawValue>,
        /// Destinations from a command.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        goto: Vec<GotoRecord>,
    },
    /// It failed after its retries.
    Error {
        /// What went wrong.
        message: String,
    },
    /// It asked a person for input (or hit a static breakpoint).
    Interrupt(InterruptRecord),
    /// A person's answer to one of its interrupts.
    Resume {
        /// The interrupt answered.
        interrupt_id: String,
        /// Which of the task's `interrupt` calls it answers.
        ordinal: u32,
        /// The answer.
        value: serde_json::Value,
    },
}

/// A pause waiting for a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InterruptRecord {
    /// Stable id; resume values are addressed to it.
    pub id: String,
    /// The node that paused (or is about to run, for a before-breakpoint).
    pub node: String,
    /// What kind of pause.
    pub when: InterruptWhen,
    /// The paused task's position in its superstep.
    #[serde(default)]
    pub task: usize,
    /// Which of the task's `interrupt` calls this is (0 for the first).
    #[serde(default)]
    pub ordinal: u32,
    /// What the node wants to show the person.
    #[serde(default)]
    pub payload: serde_json::Value,
    /// The subgraph the pausing node belongs to, below the root thread (`review:0a1b2c3d`,
    /// see [`ThreadPath`](crate::runtime::ThreadPath)); empty for the root graph's own nodes.
    /// `node` and `task` are then the child's; the pause is listed by every graph above it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// What kind of pause an interrupt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptWhen {
    /// A static breakpoint before the node ran.
    Before,
    /// A static breakpoint after the node ran.
    After,
    /// The node called `ctx.interrupt(..)`.
    Dynamic,
}

/// A claim on a thread by one running process, so that two runs never write the same thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// A unique id of the holder (one per run).
    pub owner: String,
    /// The holder's process id.
    pub pid: u32,
    /// The holder's host name.
    pub host: String,
    /// When the claim lapses unless renewed, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

/// Milliseconds since the Unix epoch, for timestamps in records.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A destination a node's command chose, as stored with the node's pending write: the graph's
/// `Goto` in the storage format's own terms, so the format does not change when the graph API
/// does. The serialized shape is the one stored since the first release.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum GotoRecord {
    /// Run this node in the next superstep.
    Node(String),
    /// Run a node with its own input.
    Send(SendRecord),
    /// End this branch.
    End,
}

/// A node invoked with its own input, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SendRecord {
    /// The node to invoke.
    pub node: String,
    /// Its input.
    pub arg: serde_json::Value,
}
