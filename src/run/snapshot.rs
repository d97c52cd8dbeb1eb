//! What reading a thread gives back, and the graphs a node declares it runs.
//!
//! [`SubgraphView`] is a child graph seen from its parent with its state type erased: what
//! reading a parent's state with its subgraphs, editing a child namespace and drawing with
//! subgraphs expanded need. A graph's nodes hand these out (`Node::subgraphs`), so the trait
//! lives here, below `graph`; the runtime implements it for every compiled graph, since reading
//! and editing a child's thread is running machinery. Its answers are snapshots, so they live
//! here too.

use crate::checkpoint::{
    CheckpointId, CheckpointMetadata, Checkpointer, InterruptRecord, TaskError,
};
use crate::error::RunError;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// A thread's state at one checkpoint, with what comes next.
#[derive(Clone, Debug, Serialize)]
pub struct StateSnapshot<S> {
    /// The state.
    pub values: S,
    /// The nodes that run next, in task order. For the thread's newest state, tasks of a
    /// stopped step whose results are saved are left out (they are in `completed`, and their
    /// results are merged into `values`).
    pub next: Vec<String>,
    /// Pauses waiting for a person (answer dynamic ones by id).
    pub interrupts: Vec<InterruptRecord>,
    /// Tasks of the next step that failed, with their errors.
    pub errors: Vec<TaskError>,
    /// Tasks of the next step whose results are already saved (they will not run again).
    pub completed: Vec<String>,
    /// The checkpoint.
    pub checkpoint_id: CheckpointId,
    /// Its parent.
    pub parent_id: Option<CheckpointId>,
    /// Supersteps done.
    pub step: u64,
    /// Why and by whom it was written.
    pub metadata: CheckpointMetadata,
    /// The children the next step's tasks started (paused or cut short inside them), each with
    /// its state and its own children, in task order; filled by
    /// [`CompiledGraph::get_state_with_subgraphs`](crate::graph::CompiledGraph::get_state_with_subgraphs), empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgraphs: Vec<SubgraphState>,
}

impl<S> StateSnapshot<S> {
    /// The same snapshot with other values (e.g. the state as JSON).
    pub fn map_values<T>(&self, values: T) -> StateSnapshot<T> {
        StateSnapshot {
            values,
            next: self.next.clone(),
            interrupts: self.interrupts.clone(),
            errors: self.errors.clone(),
            completed: self.completed.clone(),
            checkpoint_id: self.checkpoint_id,
            parent_id: self.parent_id,
            step: self.step,
            metadata: self.metadata.clone(),
            subgraphs: self.subgraphs.clone(),
        }
    }
}

/// One child run by a task of a snapshot's step, with its state.
#[derive(Clone, Debug, Serialize)]
pub struct SubgraphState {
    /// The parent's node that runs it.
    pub node: String,
    /// The task's position in the parent's step.
    pub task: usize,
    /// The child's thread path (`{parent}/{node}:{task_id}`): give it to `history`,
    /// `subgraph_state`, `update_subgraph_state` or `fork` to address the child.
    pub thread: String,
    /// False when the node does not declare the graph it runs (see [`Node::subgraphs`](crate::graph::Node::subgraphs)): the
    /// child's `values` are then `null`; its next nodes and pauses are still read.
    pub declared: bool,
    /// The child's state (newest checkpoint), with its own children nested.
    pub state: StateSnapshot<Value>,
}

/// A subgraph with its state type erased. The runtime implements it for every
/// [`CompiledGraph`](crate::graph::CompiledGraph); a node hands these out through [`Node::subgraphs`](crate::graph::Node::subgraphs).
// RunError's size is the runtime's choice; these methods pass it through unchanged.
#[allow(clippy::result_large_err)]
#[async_trait]
pub trait SubgraphView: Send + Sync + 'static {
    /// The child graph's name, when it was built with
    /// [`StateGraph::named`](crate::graph::StateGraph::named) (stored with its checkpoints, so
    /// a node declaring several graphs is told apart by it).
    fn graph_name(&self) -> Option<&str>;

    /// The graphs the child's node `node` runs.
    fn node_subgraphs(&self, node: &str) -> Vec<Arc<dyn SubgraphView>>;

    /// The child's nodes and edges as Mermaid lines, ids prefixed with `prefix`, its own
    /// subgraphs expanded `xray` levels further.
    fn mermaid_body(&self, prefix: &str, xray: usize) -> String;

    /// The state of the child namespace `thread` (newest, or at `checkpoint`), with its own
    /// children nested.
    async fn state_at(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError>;

    /// Edits the child namespace `thread` (see [`CompiledGraph::update_state`](crate::graph::CompiledGraph::update_state)).
    async fn update_at(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread: &str,
        update: Value,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError>;
}

impl std::fmt::Debug for dyn SubgraphView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubgraphView")
            .field("graph", &self.graph_name())
            .finish()
    }
}
