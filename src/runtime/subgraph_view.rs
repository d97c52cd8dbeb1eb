//! A child graph seen from its parent, its state type erased: what reading a parent's state
//! with its subgraphs, editing a child namespace and drawing with subgraphs expanded need.
//!
//! A parent holds its children only as nodes (`Arc<dyn Node<S>>`), and a node that runs one
//! with [`Context::run_subgraph`](super::Context::run_subgraph) is opaque, so each node says
//! which graphs it runs ([`Node::subgraphs`](crate::graph::Node::subgraphs): a compiled graph or a [`Subgraph`](super::Subgraph)
//! node says it by itself, a closure node through
//! [`NodeSpec::subgraph`](crate::graph::NodeSpec::subgraph)). A child namespace whose graph is
//! not declared is still listed, with its next nodes and pauses, but without its values: those
//! are stored as deltas that only the child's own state type can merge.

use crate::checkpoint::{CheckpointId, CheckpointRecord, Checkpointer};
use crate::error::RunError;
use crate::graph::CompiledGraph;
use crate::run::namespace::{task_id, ThreadPath};
use crate::run::snapshot::{StateSnapshot, SubgraphState, SubgraphView};
use crate::state::State;
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

#[async_trait]
impl<C: State> SubgraphView for CompiledGraph<C> {
    fn graph_name(&self) -> Option<&str> {
        self.name()
    }

    fn node_subgraphs(&self, node: &str) -> Vec<Arc<dyn SubgraphView>> {
        self.subgraphs_of(node)
    }

    fn mermaid_body(&self, prefix: &str, xray: usize) -> String {
        crate::graph::draw::mermaid_body(self, prefix, xray)
    }

    async fn state_at(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError> {
        let graph = self.clone().with_checkpointer(store.clone());
        let s = graph.get_state_with_subgraphs(thread, checkpoint).await?;
        Ok(s.map_values(serde_json::to_value(&s.values).map_err(|e| {
            RunError::InvalidInput(format!("the state cannot be shown as JSON: {e}"))
        })?))
    }

    async fn update_at(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread: &str,
        update: Value,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError> {
        let update: C::Update = crate::state::update_from_json(update).map_err(|why| {
            RunError::InvalidInput(format!(
                "the update does not fit the state of subgraph `{thread}`: {why}"
            ))
        })?;
        let graph = self.clone().with_checkpointer(store.clone());
        graph.update_state(thread, update, as_node).await
    }
}

impl<S: State> CompiledGraph<S> {
    /// The state of a child namespace as JSON (`{thread}/{node}:{task}`, as
    /// [`get_state_with_subgraphs`](Self::get_state_with_subgraphs) lists it), at its newest
    /// checkpoint or at `checkpoint`, with its own children nested. `values` is `null` when the
    /// node that runs it does not declare its graph.
    pub async fn subgraph_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError> {
        let store = self.store("get_state")?.clone();
        let path = parse_path(thread)?;
        match self.resolve_view(&store, &path).await? {
            Some(view) => view.state_at(&store, thread, checkpoint).await,
            None => {
                let record = self.record(thread, checkpoint, "get_state").await?;
                untyped_state(&store, &path, &record).await
            }
        }
    }

    /// Edits a child namespace's state (see [`update_state`](Self::update_state)); `update` is
    /// the child's update type as JSON. A paused child resumed afterwards (by resuming the root
    /// thread) continues from the edited state.
    pub async fn update_subgraph_state(
        &self,
        thread: &str,
        update: Value,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError> {
        let store = self.store("update_state")?.clone();
        let path = parse_path(thread)?;
        self.record(thread, None, "update_state").await?;
        let Some(view) = self.resolve_view(&store, &path).await? else {
            return Err(RunError::InvalidInput(format!(
                "cannot edit `{thread}`: the node `{}` does not declare the graph it runs, so \
                 its state type is unknown; declare it with NodeSpec::subgraph (or \
                 Node::subgraphs)",
                path.nodes().last().copied().unwrap_or_default()
            )));
        };
        view.update_at(&store, thread, update, as_node).await
    }

    /// The declared graph that runs the namespace `path`, level by level; `None` when a level
    /// is not declared.
    async fn resolve_view(
        &self,
        store: &Arc<dyn Checkpointer>,
        path: &ThreadPath,
    ) -> Result<Option<Arc<dyn SubgraphView>>, RunError> {
        let mut level = ThreadPath::root_of(path.root());
        let mut current: Option<Arc<dyn SubgraphView>> = None;
        for segment in path.segments() {
            let views = match &current {
                None => self.subgraphs_of(&segment.node),
                Some(v) => v.node_subgraphs(&segment.node),
            };
            level = level.child(&segment.node, &segment.task);
            let record = store.get_checkpoint(&level.to_string(), None).await?;
            match pick(views, record.as_ref()) {
                Some(v) => current = Some(v),
                None => return Ok(None),
            }
        }
        Ok(current)
    }

    /// The children run by the tasks of `record`'s step under `path`, in task order.
    pub(crate) async fn children_of(
        &self,
        store: &Arc<dyn Checkpointer>,
        path: &ThreadPath,
        record: &CheckpointRecord,
    ) -> Result<Vec<SubgraphState>, RunError> {
        children(store, path, record, &|node| self.subgraphs_of(node)).await
    }
}

/// The view for a child whose newest checkpoint is `record`: the declared graph of the name it
/// stored, else the only one declared.
fn pick(
    views: Vec<Arc<dyn SubgraphView>>,
    record: Option<&CheckpointRecord>,
) -> Option<Arc<dyn SubgraphView>> {
    let stored = record.and_then(|r| r.metadata.graph.as_deref());
    if let Some(name) = stored {
        if let Some(v) = views.iter().find(|v| v.graph_name() == Some(name)) {
            return Some(v.clone());
        }
    }
    if views.len() == 1 {
        return views.into_iter().next();
    }
    None
}

#[allow(clippy::result_large_err)]
fn parse_path(thread: &str) -> Result<ThreadPath, RunError> {
    let path: ThreadPath = thread
        .parse()
        .map_err(|e: crate::run::namespace::BadPath| RunError::InvalidInput(e.to_string()))?;
    if path.is_root() {
        return Err(RunError::InvalidInput(format!(
            "`{thread}` is a root thread, not a subgraph namespace (`{thread}/NODE:TASK`): use \
             get_state / update_state for it"
        )));
    }
    Ok(path)
}

type Views<'a> = &'a (dyn Fn(&str) -> Vec<Arc<dyn SubgraphView>> + Send + Sync);

/// Every child namespace the tasks of `record` started, probed in call order per task.
async fn children(
    store: &Arc<dyn Checkpointer>,
    path: &ThreadPath,
    record: &CheckpointRecord,
    views: Views<'_>,
) -> Result<Vec<SubgraphState>, RunError> {
    let mut out = Vec::new();
    for (i, task) in record.frontier.tasks.iter().enumerate() {
        for call in 0u32.. {
            let child = path.child(&task.node, &task_id(record.id, i, call));
            let thread = child.to_string();
            let Some(newest) = store.get_checkpoint(&thread, None).await? else {
                break;
            };
            let view = pick(views(&task.node), Some(&newest));
            let state = match &view {
                Some(v) => v.state_at(store, &thread, None).await?,
                None => Box::pin(untyped_state(store, &child, &newest)).await?,
            };
            out.push(SubgraphState {
                node: task.node.clone(),
                task: i,
                thread,
                declared: view.is_some(),
                state,
            });
        }
    }
    Ok(out)
}

/// A child's snapshot read without its state type: everything but the values.
async fn untyped_state(
    store: &Arc<dyn Checkpointer>,
    path: &ThreadPath,
    record: &CheckpointRecord,
) -> Result<StateSnapshot<Value>, RunError> {
    let pending = store.get_writes(&record.thread_id, record.id).await?;
    let mut snapshot = super::threads::snapshot_of(record, &pending, Value::Null);
    snapshot.subgraphs = children(store, path, record, &|_| Vec::new()).await?;
    Ok(snapshot)
}

/// What a node declares: used by [`Node::subgraphs`](crate::graph::Node::subgraphs) for compiled graphs and mapped subgraphs.
pub(crate) fn view_of<C: State>(graph: &CompiledGraph<C>) -> Arc<dyn SubgraphView> {
    Arc::new(graph.clone())
}
