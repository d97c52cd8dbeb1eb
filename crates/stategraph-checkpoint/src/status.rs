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
    /// What its graph made of its state at its newest checkpoint, as the run that reached it
    /// recorded ([`record_verdict`]); `None` when no verdict was recorded on that checkpoint (a
    /// thread not done, one written before verdicts were recorded, or by a program that records
    /// none): only its state says then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Whether a thread that reached its end failed at its job anyway (a research run where no todo
/// succeeded), as its graph judged its final state when the run ended.
///
/// Judging takes the graph and the whole state; a record of the verdict lets a listing say it
/// from a few bytes. It holds for one checkpoint: once the thread has a newer one (a resume, an
/// edit), the verdict is no longer its newest checkpoint's and is not reported.
///
/// ```
/// use stategraph_checkpoint::{record_verdict, summarize, CheckpointId, MemoryCheckpointer, Verdict};
/// # async fn demo(store: MemoryCheckpointer, checkpoint_id: CheckpointId) -> Result<(), stategraph_checkpoint::CheckpointError> {
/// // The thread's newest checkpoint is `checkpoint_id`, where its run reached its end.
/// let verdict = Verdict { checkpoint_id, failure: Some("no todo succeeded".into()) };
/// record_verdict(&store, "thread-1", &verdict).await?;
/// let summary = summarize(&store, "thread-1").await?.unwrap();
/// assert_eq!(summary.verdict, Some(verdict));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The checkpoint judged.
    pub checkpoint_id: CheckpointId,
    /// Why the run failed at its job; `None` when it did not.
    #[serde(default)]
    pub failure: Option<String>,
}

/// The journal key a verdict is kept under. Journal keys written by nodes start with a checkpoint
/// id, so this one cannot collide with them, and pruning keeps it.
const VERDICT_KEY: &str = "graph/verdict";

/// Keeps `verdict` with the thread (flushed), replacing the one before, for [`summarize`] to
/// report while its checkpoint is the thread's newest.
pub async fn record_verdict(
    store: &dyn Checkpointer,
    thread: &str,
    verdict: &Verdict,
) -> Result<(), CheckpointError> {
    let value = serde_json::to_value(verdict).map_err(CheckpointError::storage)?;
    store.put_journal(thread, VERDICT_KEY, &value).await
}

/// The verdict recorded on checkpoint `id`, if the one recorded last is on it. One that does not
/// decode is as good as none: the state can still be judged.
async fn recorded_verdict(
    store: &dyn Checkpointer,
    thread: &str,
    id: CheckpointId,
) -> Result<Option<Verdict>, CheckpointError> {
    let Some(value) = store.get_journal(thread, VERDICT_KEY).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_value::<Verdict>(value)
        .ok()
        .filter(|v| v.checkpoint_id == id))
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
pub fn pending_interrupts(pending: &[PendingWrite]) -> Vec<InterruptRecord> {
    waiting_interrupts(pending)
        .into_iter()
        .map(|w| w.record)
        .collect()
}

/// An interrupt still waiting, with the task of this graph that carries it (for a subgraph's
/// pause, the task that ran the subgraph, whose node differs from the record's).
#[derive(Clone, Debug)]
pub struct Waiting {
    pub task: usize,
    pub node: String,
    pub record: InterruptRecord,
}

/// The interrupts still waiting, each with its task. A task's pause is the set of interrupts it
/// saved in one go (a subgraph can pause on several at once): a later pause of the same task
/// replaces it (keeping the place of an interrupt saved again), and a later result or error of
/// the task ends it. Dynamic interrupts that were answered are not waiting.
pub fn waiting_interrupts(pending: &[PendingWrite]) -> Vec<Waiting> {
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
pub fn task_errors(pending: &[PendingWrite]) -> Vec<TaskError> {
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
    // Only a done thread is judged: the journal is read for it alone.
    let verdict = match status {
        ThreadStatus::Done => recorded_verdict(store, thread, record.id).await?,
        _ => None,
    };
    Ok(Some(ThreadSummary {
        thread_id: thread.to_string(),
        status,
        step: record.step,
        updated_at_ms: record.metadata.created_at_ms,
        graph: record.metadata.graph,
        checkpoint_id: record.id,
        verdict,
    }))
}
