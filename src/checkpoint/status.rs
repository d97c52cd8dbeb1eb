//! What a thread's stored records say about where it stands: paused, failed, done or stopped.
//!
//! This reads records only (the newest checkpoint and the writes saved against it), so any
//! backend can summarise a thread without knowing its graph or its state's type. Whether a live
//! process holds the thread is for the caller to add: the runtime knows it from the lease, the
//! per-thread folders from their lock.

use super::error::CheckpointError;
use super::record::{CheckpointId, InterruptRecord, InterruptWhen, PendingKind, PendingWrite};
use super::Checkpointer;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Where a thread stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    /// A live run holds it.
    Running,
    /// Waiting for a person.
    Paused,
    /// The graph reached its end.
    Done,
    /// A task failed; resuming retries it.
    Failed,
    /// Stopped mid-run (cancelled, killed, recursion limit); resuming continues it.
    Stopped,
}

impl std::fmt::Display for ThreadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ThreadStatus::Running => "running",
            ThreadStatus::Paused => "paused",
            ThreadStatus::Done => "done",
            ThreadStatus::Failed => "failed",
            ThreadStatus::Stopped => "stopped",
        })
    }
}

/// A thread at its newest checkpoint, in one line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// The thread.
    pub thread_id: String,
    /// Where it stands.
    pub status: ThreadStatus,
    /// Supersteps done.
    pub step: u64,
    /// When its newest checkpoint was written (ms since the epoch).
    pub updated_at_ms: u64,
    /// The graph that wrote it.
    pub graph: Option<String>,
    /// Its newest checkpoint.
    pub checkpoint_id: CheckpointId,
}

/// A task that failed after its retries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskError {
    /// The task's node.
    pub node: String,
    /// The task's position in its step.
    pub task: usize,
    /// The error.
    pub message: String,
}

/// The interrupts still waiting at a checkpoint, oldest first. A task that asks again after a
/// partial resume (another task's interrupt was answered) saves the same interrupt again; it is
/// listed once, as last saved.
pub(crate) fn pending_interrupts(pending: &[PendingWrite]) -> Vec<InterruptRecord> {
    waiting_interrupts(pending)
        .into_iter()
        .map(|w| w.record)
        .collect()
}

/// An interrupt still waiting, with the task of this graph that carries it (for a subgraph's
/// pause, the task that ran the subgraph, whose node differs from the record's).
#[derive(Clone, Debug)]
pub(crate) struct Waiting {
    pub(crate) task: usize,
    pub(crate) node: String,
    pub(crate) record: InterruptRecord,
}

/// The interrupts still waiting, each with its task. A task's pause is the set of interrupts it
/// saved in one go (a subgraph can pause on several at once): a later pause of the same task
/// replaces it (keeping the place of an interrupt saved again), and a later result or error of
/// the task ends it. Dynamic interrupts that were answered are not waiting.
pub(crate) fn waiting_interrupts(pending: &[PendingWrite]) -> Vec<Waiting> {
    let answered: HashSet<&str> = pending
        .iter()
        .filter_map(|w| match &w.kind {
            PendingKind::Resume { interrupt_id, .. } => Some(interrupt_id.as_str()),
            _ => None,
        })
        .collect();
    // (waiting, stale): stale entries belong to an earlier pause of a task that paused again.
    let mut waiting: Vec<(Waiting, bool)> = Vec::new();
    let mut last_pause: Option<usize> = None;
    for w in pending {
        let r = match &w.kind {
            PendingKind::Interrupt(r) => r,
            PendingKind::Update { .. } | PendingKind::Error { .. } => {
                waiting.retain(|(x, _)| x.task != w.task);
                last_pause = None;
                continue;
            }
            PendingKind::Resume { .. } => {
                last_pause = None;
                continue;
            }
        };
        if last_pause != Some(w.task) {
            for (x, stale) in waiting.iter_mut() {
                if x.task == w.task {
                    *stale = true;
                }
            }
        }
        last_pause = Some(w.task);
        let entry = Waiting {
            task: w.task,
            node: w.node.clone(),
            record: r.clone(),
        };
        match waiting.iter_mut().find(|(seen, _)| seen.record.id == r.id) {
            Some(slot) => *slot = (entry, false),
            None => waiting.push((entry, false)),
        }
    }
    waiting
        .into_iter()
        .filter(|(w, stale)| {
            let answered =
                w.record.when == InterruptWhen::Dynamic && answered.contains(w.record.id.as_str());
            !stale && !answered
        })
        .map(|(w, _)| w)
        .collect()
}

/// The tasks whose latest attempt at a checkpoint failed, in task order. A task that failed on
/// several resumes shows its latest error; one that has since finished shows none.
pub(crate) fn task_errors(pending: &[PendingWrite]) -> Vec<TaskError> {
    let mut errors: Vec<TaskError> = Vec::new();
    for w in pending {
        match &w.kind {
            PendingKind::Error { message } => {
                errors.retain(|e| e.task != w.task);
                errors.push(TaskError {
                    node: w.node.clone(),
                    task: w.task,
                    message: message.clone(),
                });
            }
            PendingKind::Update { .. } => errors.retain(|e| e.task != w.task),
            PendingKind::Interrupt(_) | PendingKind::Resume { .. } => {}
        }
    }
    errors.sort_by_key(|e| e.task);
    errors
}

/// Summarises a thread from its newest checkpoint and the writes saved against it; `None` when
/// it has no checkpoint. The status is never [`ThreadStatus::Running`]: only the caller knows
/// whether a live process holds the thread.
pub async fn summarize(
    store: &dyn Checkpointer,
    thread: &str,
) -> Result<Option<ThreadSummary>, CheckpointError> {
    let Some(record) = store.get_checkpoint(thread, None).await? else {
        return Ok(None);
    };
    let pending = store.get_writes(thread, record.id).await?;
    let status = if !task_errors(&pending).is_empty() {
        ThreadStatus::Failed
    } else if !pending_interrupts(&pending).is_empty() {
        ThreadStatus::Paused
    } else if record.frontier.is_done() {
        ThreadStatus::Done
    } else {
        ThreadStatus::Stopped
    };
    Ok(Some(ThreadSummary {
        thread_id: thread.to_string(),
        status,
        step: record.step,
        updated_at_ms: record.metadata.created_at_ms,
        graph: record.metadata.graph,
        checkpoint_id: record.id,
    }))
}
