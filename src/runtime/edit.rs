//! Editing a thread's state as LangGraph's `update_state` and `bulk_update_state` do: an edit
//! stands for a node's output (`as_node`, or the node that wrote last), its edges and routers
//! choose what runs next, and the new checkpoint's parent is the one edited (an older one
//! starts a branch).

use super::persist::{self, ChainStats, LeaseGuard, SnapshotTracker};
use super::threads::check_thread;
use super::triggers::{self, Finished};
use crate::checkpoint::{
    now_ms, CheckpointId, CheckpointMetadata, CheckpointRecord, Checkpointer, Frontier,
    InterruptWhen, NodeWrite, PendingKind, PendingWrite, Source, StateData, TaskSpec,
};
use crate::error::RunError;
use crate::graph::{CompiledGraph, GraphError};
use crate::run::namespace::ThreadPath;
use crate::state::{State, TaggedUpdate};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// One edit of [`CompiledGraph::bulk_update_state`]: an update and the node it stands for.
pub struct StateEdit<S: State> {
    /// Merged through the reducers, as that node's output.
    pub update: S::Update,
    /// The node (or `START`, or `END`); `None`: the node that wrote last (only when the step
    /// has this one edit).
    pub as_node: Option<String>,
}

impl<S: State> StateEdit<S> {
    /// An edit standing for `as_node`'s output.
    pub fn as_node(update: S::Update, as_node: impl Into<String>) -> Self {
        StateEdit {
            update,
            as_node: Some(as_node.into()),
        }
    }
}

/// LangGraph's checks: something to apply, and a node named for each of several edits.
fn check_edits<S: State>(supersteps: &[Vec<StateEdit<S>>]) -> Result<(), RunError> {
    if supersteps.is_empty() || supersteps.iter().any(Vec::is_empty) {
        return Err(RunError::InvalidInput(
            "no updates to apply: give at least one edit per step".into(),
        ));
    }
    for step in supersteps {
        if step.len() > 1 && step.iter().any(|e| e.as_node.is_none()) {
            return Err(RunError::InvalidInput(
                "several edits in one step need each its as_node (the node it stands for)".into(),
            ));
        }
        if step.len() > 1
            && step
                .iter()
                .any(|e| e.as_node.as_deref() == Some(crate::END))
        {
            return Err(RunError::InvalidInput(
                "an edit as END ends the thread and must be alone in its step".into(),
            ));
        }
    }
    Ok(())
}

/// Whose output an edit stands for.
#[derive(Clone, Copy)]
enum Writer {
    Start,
    Node(usize),
    End,
}

/// The dynamic pauses (and answers to them) of tasks that are still next at the same place
/// after an edit without `as_node`: a resume value still answers them.
fn kept_pauses(pending: &[PendingWrite], old: &Frontier, new: &Frontier) -> Vec<PendingWrite> {
    let same =
        |task: usize| old.tasks.get(task).is_some() && old.tasks.get(task) == new.tasks.get(task);
    pending
        .iter()
        .filter(|w| same(w.task))
        .filter(|w| match &w.kind {
            PendingKind::Interrupt(r) => r.when == InterruptWhen::Dynamic,
            PendingKind::Resume { .. } => true,
            _ => false,
        })
        .cloned()
        .collect()
}

/// One step's worth of edits, each tagged with the node it stands for.
struct EditedStep<S: State> {
    /// Whose output each edit stands for, and that writer's name.
    writers: Vec<(Writer, String)>,
    /// The updates as the reducers merge them.
    batch: Vec<TaggedUpdate<S::Update>>,
    /// The updates as a delta checkpoint stores them.
    writes: Vec<NodeWrite>,
}

/// How the edited state is stored: the edits as a delta on `latest`'s chain, or the whole state
/// when that chain has grown enough to want a snapshot (the default snapshot policy), or when
/// `latest` was stored under another schema version (its chain is in the old shape; a snapshot
/// starts one in the current shape).
fn stored_state<S: State>(
    latest: &CheckpointRecord,
    stats: ChainStats,
    state: &S,
    writes: Vec<NodeWrite>,
) -> Result<StateData, RunError> {
    let delta_bytes: usize = writes.iter().map(|w| w.update.get().len()).sum();
    let tracker = SnapshotTracker::new(Default::default(), stats);
    if latest.metadata.schema_version != S::VERSION || tracker.wants_snapshot(delta_bytes) {
        Ok(StateData::Snapshot(persist::to_raw(state)?))
    } else {
        Ok(StateData::Delta(writes))
    }
}

impl<S: State> CompiledGraph<S> {
    /// Edits the thread's state, writing a new checkpoint (source `update`), as LangGraph does.
    ///
    /// The edit counts as the output of `as_node`: its edges and routers decide what runs next.
    /// Without `as_node` it counts as the node that wrote last (the one that ran in the newest
    /// step that ran nodes; START if none has run; the only node of a one-node graph); when
    /// several nodes wrote in that step the edit is ambiguous and refused. With `as_node` =
    /// [`END`](crate::END), the thread ends there: nothing is left to run and its pauses are
    /// dropped. Tasks a join already fired, and a deferred node whose turn had come, stay next
    /// (an edit does not undo a join's barrier or a deferred node's trigger), and (without
    /// `as_node`) a task still next at the same place keeps its dynamic pause, so a resume
    /// value still answers it; other pauses and saved results belong to the old state and are
    /// dropped. A root thread with no checkpoint yet is edited from the empty state, its first
    /// checkpoint at step 0 (the step a run's input checkpoint takes).
    pub async fn update_state(
        &self,
        thread_id: &str,
        update: S::Update,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError> {
        let edit = StateEdit {
            update,
            as_node: as_node.map(str::to_string),
        };
        self.bulk_update_state_at(thread_id, None, vec![vec![edit]])
            .await
    }

    /// [`update_state`](Self::update_state) on an older checkpoint of the thread: the new
    /// checkpoint's parent is `checkpoint`, so it starts a branch (LangGraph's
    /// `update_state(old_config, ...)`); it becomes the thread's newest.
    pub async fn update_state_at(
        &self,
        thread_id: &str,
        checkpoint: CheckpointId,
        update: S::Update,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError> {
        let edit = StateEdit {
            update,
            as_node: as_node.map(str::to_string),
        };
        self.bulk_update_state_at(thread_id, Some(checkpoint), vec![vec![edit]])
            .await
    }

    /// Several edits at once (LangGraph's `bulk_update_state`): each inner list is one
    /// checkpoint, its edits merged together as the outputs of one step (each names its
    /// `as_node` when there are several), each list on top of the previous one. Returns the
    /// last checkpoint. On a thread with no checkpoint yet the first list applies to the empty
    /// state (as START, to stand for the input, then as the nodes that ran), so a thread's
    /// history can be written without running it:
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{checkpoint::MemoryCheckpointer, graph::StateGraph, runtime::{Context, StateEdit}, State, START, END};
    /// #[derive(State, Clone, Default, Serialize, Deserialize)]
    /// struct S { foo: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("agent", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default().foo("agent".to_string())) });
    /// g.add_edge(START, "agent").add_edge("agent", END);
    /// let graph = g.compile().unwrap().with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    /// let foo = |v: &str| SUpdate::default().foo(v.to_string());
    /// graph
    ///     .bulk_update_state("new", vec![
    ///         vec![StateEdit::as_node(foo("input"), START)],
    ///         vec![StateEdit::as_node(foo("agent"), "agent")],
    ///     ])
    ///     .await
    ///     .unwrap();
    /// let state = graph.get_state("new", None).await.unwrap();
    /// assert_eq!((state.values.foo.as_str(), state.step), ("agent", 1));
    /// # }
    /// ```
    pub async fn bulk_update_state(
        &self,
        thread_id: &str,
        supersteps: Vec<Vec<StateEdit<S>>>,
    ) -> Result<CheckpointId, RunError> {
        self.bulk_update_state_at(thread_id, None, supersteps).await
    }

    async fn bulk_update_state_at(
        &self,
        thread_id: &str,
        checkpoint: Option<CheckpointId>,
        supersteps: Vec<Vec<StateEdit<S>>>,
    ) -> Result<CheckpointId, RunError> {
        check_edits(&supersteps)?;
        for edit in supersteps.iter().flatten() {
            if let Some(name) = &edit.as_node {
                self.writer_named(name)?;
            }
        }
        let store = self.store("update_state")?.clone();
        // A root thread with no checkpoint yet starts from an empty one, as LangGraph's does: its
        // first edits stand for the input (as START) or for the nodes that would have run.
        let mut base = match checkpoint {
            None if ThreadPath::is_root_id(thread_id) => {
                check_thread(thread_id)?;
                store.get_checkpoint(thread_id, None).await?
            }
            _ => Some(self.record(thread_id, checkpoint, "update_state").await?),
        };
        // A child namespace is written under its root thread's lease, as its runs are.
        let root = check_thread(thread_id)?;
        let lease =
            LeaseGuard::acquire(store.clone(), root.root(), Duration::from_secs(15)).await?;
        let mut result = Err(RunError::InvalidInput("no updates".into()));
        for edits in supersteps {
            result = self
                .write_update(&store, thread_id, base.as_ref(), edits)
                .await;
            match &result {
                Ok(id) => match store.get_checkpoint(thread_id, Some(*id)).await {
                    Ok(Some(next)) => base = Some(next),
                    Ok(None) => break,
                    Err(e) => {
                        result = Err(e.into());
                        break;
                    }
                },
                Err(_) => break,
            }
        }
        lease.release().await;
        result
    }

    /// The writer an `as_node` names.
    fn writer_named(&self, name: &str) -> Result<Writer, RunError> {
        if name == crate::END {
            return Ok(Writer::End);
        }
        if name == crate::START {
            return Ok(Writer::Start);
        }
        self.topology
            .node_index(name)
            .map(Writer::Node)
            .ok_or_else(|| {
                GraphError::UnknownNode {
                    name: name.to_string(),
                    context: "update_state as_node",
                    known: self.node_names().join(", "),
                }
                .into()
            })
    }

    /// The node that wrote last before `record` (LangGraph's rule for an edit without
    /// `as_node`): the nodes of the newest checkpoint written by nodes, walking back over
    /// inputs and forks.
    async fn last_writer(
        &self,
        store: &dyn Checkpointer,
        record: &CheckpointRecord,
    ) -> Result<Writer, RunError> {
        if self.topology.builder.nodes.len() == 1 {
            return Ok(Writer::Node(0));
        }
        let mut current = std::borrow::Cow::Borrowed(record);
        loop {
            let nodes: BTreeSet<usize> = current
                .metadata
                .writers
                .iter()
                .filter_map(|w| self.topology.node_index(w))
                .collect();
            if nodes.len() > 1 {
                return Err(RunError::AmbiguousEdit {
                    thread_id: record.thread_id.clone(),
                    nodes: nodes
                        .iter()
                        .map(|&i| self.topology.node_name(i).to_string())
                        .collect(),
                });
            }
            if let Some(&i) = nodes.first() {
                return Ok(Writer::Node(i));
            }
            let Some(parent) = current.parent_id else {
                return Ok(Writer::Start);
            };
            match store
                .get_checkpoint(&record.thread_id, Some(parent))
                .await?
            {
                Some(p) => current = std::borrow::Cow::Owned(p),
                None => return Ok(Writer::Start),
            }
        }
    }

    /// Writes one checkpoint over `latest` (`None`: a thread with no checkpoint yet, edited from
    /// the empty state) with `edits` merged as the outputs of one step.
    async fn write_update(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread_id: &str,
        latest: Option<&CheckpointRecord>,
        edits: Vec<StateEdit<S>>,
    ) -> Result<CheckpointId, RunError> {
        let implicit = edits.iter().all(|e| e.as_node.is_none());
        let mut step = self.edits_as_step(store.as_ref(), latest, edits).await?;
        let (mut state, stats) = match latest {
            Some(latest) => persist::load_state::<S>(store.as_ref(), latest).await?,
            None => (S::default(), ChainStats::default()),
        };
        state
            .apply(&mut step.batch)
            .map_err(|e| RunError::InvalidInput(e.to_string()))?;
        let empty = Frontier::default();
        let previous = latest.map_or(&empty, |l| &l.frontier);
        let at = latest.map_or(0, |l| l.step);
        let frontier = self.frontier_after_edit(&state, previous, at, &step.writers)?;
        // The first checkpoint of a thread is a snapshot, as a run's first is.
        let state_data = match latest {
            Some(latest) => stored_state(latest, stats, &state, step.writes)?,
            None => StateData::Snapshot(persist::to_raw(&state)?),
        };
        let id = persist::new_checkpoint_id();
        // Only an edit without as_node keeps pauses (it stands in for "edit, then answer"); an
        // edit as a named node starts that node's successors afresh, as before.
        let carried = match latest {
            Some(latest) if implicit => kept_pauses(
                &store.get_writes(thread_id, latest.id).await?,
                &latest.frontier,
                &frontier,
            ),
            _ => Vec::new(),
        };
        let writers = step.writers.into_iter().map(|(_, name)| name).collect();
        let record = self.update_record(thread_id, latest, id, state_data, frontier, writers);
        if !carried.is_empty() {
            store.put_writes(thread_id, id, &carried, false).await?;
        }
        store.put_checkpoint(&record, true).await?;
        Ok(id)
    }

    /// Names each edit's writer (`as_node`, else the node that wrote last before `latest`) and
    /// tags its update with it, both as the reducers merge it and as a delta stores it.
    async fn edits_as_step(
        &self,
        store: &dyn Checkpointer,
        latest: Option<&CheckpointRecord>,
        edits: Vec<StateEdit<S>>,
    ) -> Result<EditedStep<S>, RunError> {
        let mut step = EditedStep {
            writers: Vec::with_capacity(edits.len()),
            batch: Vec::with_capacity(edits.len()),
            writes: Vec::with_capacity(edits.len()),
        };
        for edit in edits {
            let writer = match &edit.as_node {
                Some(name) => self.writer_named(name)?,
                None => match latest {
                    Some(latest) => self.last_writer(store, latest).await?,
                    None => self.first_writer(),
                },
            };
            let name = match writer {
                Writer::Node(i) => self.topology.node_name(i).to_string(),
                Writer::Start => crate::START.to_string(),
                Writer::End => crate::END.to_string(),
            };
            step.writes.push(NodeWrite {
                node: name.clone(),
                update: persist::to_raw(&edit.update)?,
            });
            step.batch
                .push(TaggedUpdate::new(name.as_str(), edit.update));
            step.writers.push((writer, name));
        }
        Ok(step)
    }

    /// What runs after the edits: nothing when one stands for END (the thread ends there),
    /// else what the writers' edges and routers choose after `previous` (the edited
    /// checkpoint's frontier).
    fn frontier_after_edit(
        &self,
        state: &S,
        previous: &Frontier,
        step: u64,
        writers: &[(Writer, String)],
    ) -> Result<Frontier, RunError> {
        if writers.iter().any(|(w, _)| matches!(w, Writer::End)) {
            return Ok(Frontier::default());
        }
        let nodes: Vec<Option<usize>> = writers
            .iter()
            .map(|(w, _)| match w {
                Writer::Node(i) => Some(*i),
                _ => None,
            })
            .collect();
        self.next_after_edit(state, previous, step, &nodes)
    }

    /// Whose output an edit without `as_node` stands for on a thread with no checkpoint yet:
    /// the only node of a one-node graph, else START (the input).
    fn first_writer(&self) -> Writer {
        if self.topology.builder.nodes.len() == 1 {
            Writer::Node(0)
        } else {
            Writer::Start
        }
    }

    /// The checkpoint an edit writes: parent `latest`, one step on (step 0 on a thread with no
    /// checkpoint yet, the step a run's input checkpoint takes), source `update`, its writers
    /// the nodes the edits stand for. The graph's name is kept from `latest` when this graph
    /// has none, so a thread stays tied to the graph that made it.
    fn update_record(
        &self,
        thread_id: &str,
        latest: Option<&CheckpointRecord>,
        id: CheckpointId,
        state: StateData,
        frontier: Frontier,
        writers: Vec<String>,
    ) -> CheckpointRecord {
        CheckpointRecord {
            thread_id: thread_id.to_string(),
            id,
            parent_id: latest.map(|l| l.id),
            step: latest.map_or(0, |l| l.step + 1),
            state,
            frontier,
            metadata: CheckpointMetadata {
                source: Source::Update,
                writers,
                created_at_ms: now_ms(),
                schema_version: S::VERSION,
                run_id: uuid::Uuid::now_v7().to_string(),
                graph: self
                    .name()
                    .map(str::to_string)
                    .or_else(|| latest.and_then(|l| l.metadata.graph.clone())),
            },
        }
    }

    /// The frontier after edits that stand for `nodes`' outputs (`None`: START's): what their
    /// edges and routers choose, plus the tasks of `previous` an edit does not take back, as
    /// LangGraph's channels keep them: a task a join had already fired (the join's barrier is
    /// not undone), and a deferred node whose turn had come (its trigger waits until it runs),
    /// unless the edit triggers it again (it then waits for its turn again).
    fn next_after_edit(
        &self,
        state: &S,
        previous: &Frontier,
        step: u64,
        nodes: &[Option<usize>],
    ) -> Result<Frontier, RunError> {
        let finished: Vec<Finished<'_>> = nodes
            .iter()
            .map(|&node| Finished { node, goto: &[] })
            .collect();
        let topology = &self.topology;
        let mut next = triggers::advance(topology, state, &finished, previous, step)?;
        let is_next = |next: &Frontier, i: usize| {
            let name = topology.node_name(i);
            next.tasks
                .iter()
                .any(|t| t.arg.is_none() && *t.node == **name)
                || next.deferred.iter().any(|d| **d == **name)
        };
        let kept: Vec<usize> = previous
            .tasks
            .iter()
            .filter(|t| t.arg.is_none())
            .filter_map(|t| topology.node_index(&t.node))
            .filter(|&i| {
                topology.builder.nodes[i].options.deferred
                    || topology.joins.iter().any(|j| j.target == i)
            })
            .filter(|&i| !is_next(&next, i))
            .collect();
        if !kept.is_empty() {
            let mut pull: Vec<usize> = next
                .tasks
                .iter()
                .filter(|t| t.arg.is_none())
                .filter_map(|t| topology.node_index(&t.node))
                .chain(kept)
                .collect();
            pull.sort_unstable();
            pull.dedup();
            let sends = next.tasks.iter().filter(|t| t.arg.is_some()).cloned();
            let tasks = pull
                .into_iter()
                .map(|i| TaskSpec {
                    node: topology.node_name(i).to_string(),
                    arg: None,
                })
                .chain(sends)
                .collect();
            next.tasks = tasks;
        }
        Ok(next)
    }
}
