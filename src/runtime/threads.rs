//! Thread operations: inspect, list, edit, fork, rerun, delete, prune.

use super::persist::{self, LeaseGuard};
use super::saved::{newest_view, COMMAND_TASK};
use super::{Resume, RunOutcome};
use crate::checkpoint::{
    now_ms, summarize, validate_thread_id, CheckpointError, CheckpointId, CheckpointMetadata,
    CheckpointRecord, Checkpointer, Frontier, PendingKind, PendingWrite, Source, StateData,
};
pub(crate) use crate::checkpoint::{pending_interrupts, task_errors};
pub use crate::checkpoint::{TaskError, ThreadStatus, ThreadSummary};
use crate::error::RunError;
use crate::graph::{CompiledGraph, GraphError};
use crate::run::config::RunConfig;
use crate::run::namespace::ThreadPath;
use crate::run::snapshot::StateSnapshot;
use crate::state::State;
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// A root thread id or a child namespace's path (`{root}/{node}:{task}`), checked.
#[allow(clippy::result_large_err)]
pub(crate) fn check_thread(thread_id: &str) -> Result<ThreadPath, RunError> {
    if crate::checkpoint::is_root_thread(thread_id) {
        validate_thread_id(thread_id)?;
        return Ok(ThreadPath::root_of(thread_id));
    }
    // Not a namespace either: refused as the thread id it was probably meant to be.
    thread_id.parse::<ThreadPath>().or_else(|_| {
        validate_thread_id(thread_id)?;
        Ok(ThreadPath::root_of(thread_id))
    })
}

/// A snapshot of `record` with its pending writes, holding `values`.
pub(crate) fn snapshot_of<V>(
    record: &CheckpointRecord,
    pending: &[PendingWrite],
    values: V,
) -> StateSnapshot<V> {
    // In task order, like everything about a step: results are saved in finish order.
    let mut completed: Vec<(usize, String)> = pending
        .iter()
        .filter(|w| matches!(w.kind, PendingKind::Update { .. }) && w.task != COMMAND_TASK)
        .map(|w| (w.task, w.node.clone()))
        .collect();
    completed.sort();
    completed.dedup();
    StateSnapshot {
        values,
        next: record.frontier.next_nodes(),
        interrupts: pending_interrupts(pending),
        errors: task_errors(pending),
        completed: completed.into_iter().map(|(_, node)| node).collect(),
        checkpoint_id: record.id,
        parent_id: record.parent_id,
        step: record.step,
        metadata: record.metadata.clone(),
        subgraphs: Vec::new(),
    }
}

/// One entry of a thread's history.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryEntry {
    /// The checkpoint.
    pub checkpoint_id: CheckpointId,
    /// Its parent.
    pub parent_id: Option<CheckpointId>,
    /// Supersteps done.
    pub step: u64,
    /// What ran next from it.
    pub next: Vec<String>,
    /// Why and by whom it was written.
    pub metadata: CheckpointMetadata,
    /// True when it stores the whole state (false: the step's writes).
    pub snapshot: bool,
    /// The writers whose update came from the node cache (the node did not run), in task order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cached: Vec<String>,
}

/// Which checkpoints `history` returns: newest first, filtered, paged.
#[derive(Clone, Debug)]
pub struct HistoryQuery {
    /// At most this many.
    pub limit: usize,
    /// Only checkpoints older than this one (the next page).
    pub before: Option<CheckpointId>,
    /// Only checkpoints written for this reason.
    pub source: Option<Source>,
    /// Only checkpoints holding a write by this node.
    pub writer: Option<String>,
}

impl Default for HistoryQuery {
    fn default() -> Self {
        HistoryQuery {
            limit: 100,
            before: None,
            source: None,
            writer: None,
        }
    }
}

impl<S: State> CompiledGraph<S> {
    pub(crate) fn store(
        &self,
        operation: &'static str,
    ) -> Result<&Arc<dyn Checkpointer>, RunError> {
        self.checkpointer
            .as_ref()
            .ok_or(RunError::NoCheckpointer { operation })
    }

    pub(crate) async fn record(
        &self,
        thread_id: &str,
        checkpoint: Option<CheckpointId>,
        operation: &'static str,
    ) -> Result<CheckpointRecord, RunError> {
        check_thread(thread_id)?;
        let store = self.store(operation)?;
        store
            .get_checkpoint(thread_id, checkpoint)
            .await?
            .ok_or_else(|| match checkpoint {
                Some(id) => RunError::CheckpointNotFound {
                    thread_id: thread_id.to_string(),
                    checkpoint: id.to_string(),
                },
                None => RunError::ThreadNotFound {
                    thread_id: thread_id.to_string(),
                },
            })
    }

    /// The snapshot `get_state` returns, with the record it was read from.
    async fn snapshot(
        &self,
        thread_id: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<(StateSnapshot<S>, CheckpointRecord), RunError> {
        let record = self.record(thread_id, checkpoint, "get_state").await?;
        let store = self.store("get_state")?;
        let (values, _) = persist::load_state::<S>(store.as_ref(), &record).await?;
        let pending = store.get_writes(thread_id, record.id).await?;
        let mut snapshot = snapshot_of(&record, &pending, values);
        // The newest state shows a stopped step's finished results merged, as LangGraph does;
        // a checkpoint asked for by id shows exactly what it stored.
        if checkpoint.is_none() {
            let values = std::mem::take(&mut snapshot.values);
            let (values, next) = newest_view(values, &record.frontier, &pending);
            snapshot.values = values;
            snapshot.next = next;
        }
        Ok((snapshot, record))
    }

    /// The thread's state at its newest checkpoint, or at `checkpoint`.
    pub async fn get_state(
        &self,
        thread_id: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        Ok(self.snapshot(thread_id, checkpoint).await?.0)
    }

    /// Like [`get_state`](Self::get_state), with the children the next step's tasks started
    /// nested in [`StateSnapshot::subgraphs`] (LangGraph's `get_state(config, subgraphs=True)`):
    /// a run paused inside a child shows the child's state, next nodes and pauses under the
    /// task that runs it, and so on down. Each child's `thread` addresses it for
    /// [`history`](Self::history), [`subgraph_state`](Self::subgraph_state),
    /// [`update_subgraph_state`](Self::update_subgraph_state) and [`fork`](Self::fork).
    pub async fn get_state_with_subgraphs(
        &self,
        thread_id: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        let (mut snapshot, record) = self.snapshot(thread_id, checkpoint).await?;
        let path = check_thread(thread_id)?;
        let store = self.store("get_state")?;
        snapshot.subgraphs = self.children_of(store, &path, &record).await?;
        Ok(snapshot)
    }

    /// The thread's checkpoints, newest first, filtered and paged by `query`.
    ///
    /// A damaged checkpoint is left out (and logged), so the good ones around it can still be
    /// found and forked from; reading the damaged one with `get_state` reports it.
    pub async fn history(
        &self,
        thread_id: &str,
        query: HistoryQuery,
    ) -> Result<Vec<HistoryEntry>, RunError> {
        check_thread(thread_id)?;
        let store = self.store("history")?;
        // Only a graph with a cached node can have cache hits to mark (`cache.rs`).
        let caches = self
            .topology
            .builder
            .nodes
            .iter()
            .any(|n| n.options.cache.is_some());
        let mut out = Vec::new();
        let mut before = query.before;
        let page = query.limit.clamp(1, 500);
        loop {
            let batch = match store.list_checkpoints(thread_id, before, page).await {
                Ok(batch) => batch,
                // One damaged record fails the page it is on. Read on one record at a time and
                // step over the damaged ones, so the good checkpoints stay listed (to fork from).
                Err(CheckpointError::Corrupt {
                    checkpoint: Some(_),
                    ..
                }) => match store.list_checkpoints(thread_id, before, 1).await {
                    Ok(one) => one,
                    Err(CheckpointError::Corrupt {
                        checkpoint: Some(bad),
                        source,
                        ..
                    }) => {
                        tracing::warn!(thread = thread_id, checkpoint = %bad, error = %source, "history skips a damaged checkpoint");
                        before = Some(bad);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            };
            if batch.is_empty() {
                break;
            }
            before = batch.last().map(|r| r.id);
            for r in batch {
                let keep = query.source.is_none_or(|s| s == r.metadata.source)
                    && query
                        .writer
                        .as_ref()
                        .is_none_or(|w| r.metadata.writers.contains(w));
                if keep {
                    let cached = match caches {
                        true => super::cache::hits_of(store.as_ref(), thread_id, &r).await,
                        false => Vec::new(),
                    };
                    out.push(HistoryEntry {
                        cached,
                        checkpoint_id: r.id,
                        parent_id: r.parent_id,
                        step: r.step,
                        next: r.frontier.next_nodes(),
                        snapshot: r.state.is_snapshot(),
                        metadata: r.metadata,
                    });
                    if out.len() >= query.limit {
                        return Ok(out);
                    }
                }
            }
        }
        if out.is_empty()
            && query.before.is_none()
            && store.get_checkpoint(thread_id, None).await?.is_none()
        {
            return Err(RunError::ThreadNotFound {
                thread_id: thread_id.to_string(),
            });
        }
        Ok(out)
    }

    /// The thread's checkpoints as states (values, next, interrupts, metadata), newest first,
    /// filtered and paged like [`history`](Self::history) (LangGraph's `get_state_history`).
    /// Each is read whole, so ask for pages on a long thread.
    pub async fn get_state_history(
        &self,
        thread_id: &str,
        query: HistoryQuery,
    ) -> Result<Vec<StateSnapshot<S>>, RunError> {
        let mut out = Vec::new();
        for entry in self.history(thread_id, query).await? {
            out.push(self.get_state(thread_id, Some(entry.checkpoint_id)).await?);
        }
        Ok(out)
    }

    /// Every thread in the store with its status, newest update first.
    pub async fn threads(&self) -> Result<Vec<ThreadSummary>, RunError> {
        let store = self.store("threads")?;
        let mut out = Vec::new();
        for thread_id in store.list_threads().await? {
            let Some(mut summary) = summarize(store.as_ref(), &thread_id).await? else {
                continue;
            };
            let lease = store.get_lease(&thread_id).await?;
            if lease.as_ref().is_some_and(persist::lease_is_live) {
                summary.status = ThreadStatus::Running;
            }
            out.push(summary);
        }
        out.sort_by_key(|t| std::cmp::Reverse(t.updated_at_ms));
        Ok(out)
    }

    /// Starts a new thread from a checkpoint of another; the source thread is untouched.
    /// Returns the new thread's id. Resume it to run from there.
    ///
    /// The copy keeps the checkpoint's id, so the children its tasks had started keep their
    /// namespaces: a child that had not finished (a run paused or cut short inside it) is
    /// copied with it, and the fork resumes inside the child. `thread_id` may be a child
    /// namespace (`{thread}/{node}:{task}`, see
    /// [`get_state_with_subgraphs`](Self::get_state_with_subgraphs)) and `checkpoint` one of the
    /// child's (see [`history`](Self::history)): the new root thread is then the parent as it
    /// was when that child ran, with the child at `checkpoint`, so resuming it reruns neither
    /// the parent's finished steps nor the child's steps before `checkpoint`.
    pub async fn fork(
        &self,
        thread_id: &str,
        checkpoint: CheckpointId,
        new_thread: Option<String>,
    ) -> Result<String, RunError> {
        let store = self.store("fork")?.clone();
        let path = check_thread(thread_id)?;
        let source = self.record(thread_id, Some(checkpoint), "fork").await?;
        let new_id = new_thread.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        validate_thread_id(&new_id)?;
        if store.get_checkpoint(&new_id, None).await?.is_some() {
            return Err(RunError::InvalidInput(format!(
                "thread `{new_id}` already exists: fork into a new thread id"
            )));
        }
        if path.is_root() {
            self.fork_root(&store, &source, &new_id, None).await?;
            let dst = ThreadPath::root_of(new_id.clone());
            super::subgraph_fork::copy_open_children(&store, &path, &source, &dst).await?;
        } else {
            super::subgraph_fork::fork_from_child(self, &store, &path, &source, &new_id).await?;
        }
        Ok(new_id)
    }

    /// Writes `source` (a root checkpoint) as the first checkpoint of `new_id`, a snapshot under
    /// the same id, with the writes its tasks left against it (a pause waiting for an answer,
    /// siblings that finished: a fork of a paused checkpoint is paused), except `skip_task`'s.
    pub(crate) async fn fork_root(
        &self,
        store: &Arc<dyn Checkpointer>,
        source: &CheckpointRecord,
        new_id: &str,
        skip_task: Option<usize>,
    ) -> Result<(), RunError> {
        let (state, _) = persist::load_state::<S>(store.as_ref(), source).await?;
        let record = CheckpointRecord {
            thread_id: new_id.to_string(),
            id: source.id,
            parent_id: None,
            step: source.step,
            state: StateData::Snapshot(persist::to_raw(&state)?),
            frontier: Frontier {
                tasks: source.frontier.tasks.clone(),
                deferred: source.frontier.deferred.clone(),
                joins: source.frontier.joins.clone(),
            },
            metadata: CheckpointMetadata {
                source: Source::Fork,
                writers: Vec::new(),
                created_at_ms: now_ms(),
                schema_version: S::VERSION,
                run_id: uuid::Uuid::now_v7().to_string(),
                graph: source.metadata.graph.clone(),
            },
        };
        store.put_checkpoint(&record, true).await?;
        let writes: Vec<PendingWrite> = store
            .get_writes(&source.thread_id, source.id)
            .await?
            .into_iter()
            .filter(|w| Some(w.task) != skip_task)
            .collect();
        if !writes.is_empty() {
            store.put_writes(new_id, record.id, &writes, true).await?;
        }
        Ok(())
    }

    /// Runs a stage again: finds the newest checkpoint from which `node` was about to run and
    /// replays from there on a new branch of the same thread. Everything before it is kept;
    /// everything after it is recomputed.
    pub async fn rerun_from(
        &self,
        thread_id: &str,
        node: &str,
        config: RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        if self.topology.node_index(node).is_none() {
            return Err(GraphError::UnknownNode {
                name: node.to_string(),
                context: "the node to rerun from",
                known: self.node_names().join(", "),
            }
            .into());
        }
        let store = self.store("rerun")?;
        validate_thread_id(thread_id)?;
        let mut before = None;
        loop {
            let page = store.list_checkpoints(thread_id, before, 200).await?;
            if page.is_empty() {
                break;
            }
            before = page.last().map(|r| r.id);
            if let Some(found) = page
                .iter()
                .find(|r| r.frontier.tasks.iter().any(|t| t.node == node))
            {
                let config = config.from_checkpoint(found.id);
                return self.resume(thread_id, Resume::Continue, config).await;
            }
        }
        self.record(thread_id, None, "rerun").await?;
        Err(RunError::InvalidInput(format!(
            "node `{node}` never ran on thread `{thread_id}`: nothing to rerun from"
        )))
    }

    /// Deletes a thread and everything stored for it. Refused while a run holds it.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), RunError> {
        let store = self.store("delete")?.clone();
        self.record(thread_id, None, "delete").await?;
        let lease = LeaseGuard::acquire(store.clone(), thread_id, Duration::from_secs(15)).await?;
        let result = store.delete_thread(thread_id).await;
        drop(lease);
        Ok(result?)
    }

    /// Deletes all but the newest `keep` checkpoints of a thread (at least one is kept).
    /// Kept checkpoints that stored only deltas over deleted ones are rewritten as snapshots
    /// first, so every kept checkpoint still reads back exactly. Returns how many were deleted.
    pub async fn prune(&self, thread_id: &str, keep: usize) -> Result<usize, RunError> {
        let store = self.store("prune")?.clone();
        self.record(thread_id, None, "prune").await?;
        let lease = LeaseGuard::acquire(store.clone(), thread_id, Duration::from_secs(15)).await?;
        let result = self.prune_held(&store, thread_id, keep.max(1)).await;
        lease.release().await;
        result
    }

    async fn prune_held(
        &self,
        store: &Arc<dyn Checkpointer>,
        thread_id: &str,
        keep: usize,
    ) -> Result<usize, RunError> {
        // Only ids are kept across pages: a long thread's snapshots, read back whole, would not
        // fit in memory together.
        let mut all = Vec::new();
        let mut before = None;
        loop {
            let page = store.list_checkpoints(thread_id, before, 500).await?;
            if page.is_empty() {
                break;
            }
            before = page.last().map(|r| r.id);
            all.extend(page.iter().map(|r| r.id));
        }
        if all.len() <= keep {
            return Ok(0);
        }
        let doomed: BTreeSet<CheckpointId> = all[keep..].iter().copied().collect();
        for id in &all[..keep] {
            let Some(record) = store.get_checkpoint(thread_id, Some(*id)).await? else {
                continue;
            };
            if self.chain_crosses(store.as_ref(), &record, &doomed).await? {
                let (state, _) = persist::load_state::<S>(store.as_ref(), &record).await?;
                let mut rewritten = record;
                rewritten.state = StateData::Snapshot(persist::to_raw(&state)?);
                store.put_checkpoint(&rewritten, true).await?;
            }
        }
        let ids: Vec<CheckpointId> = doomed.into_iter().collect();
        store.delete_checkpoints(thread_id, &ids).await?;
        Ok(ids.len())
    }

    /// Whether reading `record` needs any checkpoint in `doomed`.
    async fn chain_crosses(
        &self,
        store: &dyn Checkpointer,
        record: &CheckpointRecord,
        doomed: &BTreeSet<CheckpointId>,
    ) -> Result<bool, RunError> {
        let mut current = record.clone();
        while let StateData::Delta(_) = current.state {
            let Some(parent) = current.parent_id else {
                return Ok(false);
            };
            if doomed.contains(&parent) {
                return Ok(true);
            }
            match store
                .get_checkpoint(&record.thread_id, Some(parent))
                .await?
            {
                Some(p) => current = p,
                None => return Ok(false),
            }
        }
        Ok(false)
    }
}
