//! The run's side of the long-term store: a step's staged writes (`run/store.rs` says why they
//! are staged) are gathered in task order, kept beside the step's checkpoint before it is
//! saved, applied once it is, and applied again by a resume that finds them unmarked.
//!
//! Exactly once in sync mode (the default): the checkpoint is on disk before the writes reach
//! the store. In async and exit modes the checkpoint may not be on disk yet when they are
//! applied, so a kill can lose steps whose writes were applied; their rerun writes them again
//! (the same key is overwritten; only an item put under a fresh key can then appear twice).

use super::{Outcome, Run};
use crate::checkpoint::store::StoreOp;
use crate::checkpoint::CheckpointId;
use crate::error::RunError;
use crate::run::context::task_journal_key;
use crate::run::store::{StagedWrites, TASK_STORE_KEY};
use crate::state::State;

/// Where a step's gathered writes are kept: beside its checkpoint, pruned with it.
fn step_key(checkpoint: CheckpointId) -> String {
    format!("{checkpoint}/store")
}

/// Present once a step's writes reached the store.
fn applied_key(checkpoint: CheckpointId) -> String {
    format!("{checkpoint}/store/applied")
}

impl<S: State> Run<S> {
    /// The writes the step's finished tasks staged, in task order: this run's tasks' from the
    /// attempt that finished, and an earlier run's for results reused from it. Reads nothing
    /// when the run has no store.
    pub(super) async fn staged_store_writes(
        &self,
        outcomes: &[Outcome<S>],
    ) -> Result<Vec<StoreOp>, RunError> {
        let (Some(link), Some(checkpointer)) = (&self.inherit.store, self.store()) else {
            return Ok(Vec::new());
        };
        let mut ops = Vec::new();
        for (task, outcome) in outcomes.iter().enumerate() {
            let attempt = match outcome {
                Outcome::Done { .. } => {
                    match link.staged_by(&self.thread_id, self.checkpoint_id, task) {
                        Some(attempt) => Some(attempt),
                        None => continue,
                    }
                }
                Outcome::Reused { .. } => None,
                Outcome::Failed { .. } | Outcome::Handled { .. } | Outcome::Interrupted(_) => {
                    continue
                }
            };
            let key = task_journal_key(self.checkpoint_id, task, TASK_STORE_KEY);
            let Some(value) = checkpointer.get_journal(&self.thread_id, &key).await? else {
                continue;
            };
            let staged: StagedWrites = self.decode_store_writes(value, "a task's staged writes")?;
            let current = staged.run_id == *self.run_id && Some(staged.attempt) == attempt;
            if attempt.is_none() || current {
                ops.extend(staged.ops);
            }
        }
        link.forget_checkpoint(&self.thread_id, self.checkpoint_id);
        Ok(ops)
    }

    /// Task `task` finished, and its result is about to be saved for a later run to reuse
    /// (which applies whatever entry the task's journal then holds): an entry an earlier run
    /// or attempt staged, which did not finish, is replaced by an empty one of this run, so it
    /// never reaches the store with a result that is not its. Reads the journal only when the
    /// finishing attempt staged nothing.
    pub(super) async fn supersede_stale_staging(&self, task: usize) -> Result<(), RunError> {
        let (Some(link), Some(checkpointer)) = (&self.inherit.store, self.store()) else {
            return Ok(());
        };
        if link
            .staged_by(&self.thread_id, self.checkpoint_id, task)
            .is_some()
        {
            return Ok(());
        }
        let key = task_journal_key(self.checkpoint_id, task, TASK_STORE_KEY);
        if checkpointer
            .get_journal(&self.thread_id, &key)
            .await?
            .is_none()
        {
            return Ok(());
        }
        let nothing = StagedWrites {
            run_id: self.run_id.to_string(),
            attempt: 0,
            ops: Vec::new(),
        };
        let value = serde_json::to_value(&nothing).map_err(|e| self.store_failed(e.to_string()))?;
        checkpointer
            .put_journal(&self.thread_id, &key, &value)
            .await?;
        Ok(())
    }

    /// Keeps the step's writes beside the checkpoint about to be saved (`self.checkpoint_id`),
    /// before it, so a checkpoint on disk implies its writes are.
    pub(super) async fn keep_store_writes(&self, ops: &[StoreOp]) -> Result<(), RunError> {
        let Some(checkpointer) = self.store().filter(|_| !ops.is_empty()) else {
            return Ok(());
        };
        let value = serde_json::to_value(ops).map_err(|e| self.store_failed(e.to_string()))?;
        checkpointer
            .put_journal(&self.thread_id, &step_key(self.checkpoint_id), &value)
            .await?;
        Ok(())
    }

    /// Once the step's checkpoint `at` is saved: applies its writes and marks them applied.
    pub(super) async fn apply_store_writes(
        &self,
        at: CheckpointId,
        ops: &[StoreOp],
    ) -> Result<(), RunError> {
        let (Some(link), Some(checkpointer)) = (&self.inherit.store, self.store()) else {
            return Ok(());
        };
        if ops.is_empty() {
            return Ok(());
        }
        link.store
            .batch(ops)
            .await
            .map_err(|source| RunError::Store {
                thread_id: self.thread_id.to_string(),
                checkpoint: at,
                source,
            })?;
        checkpointer
            .put_journal(
                &self.thread_id,
                &applied_key(at),
                &serde_json::Value::Bool(true),
            )
            .await?;
        Ok(())
    }

    /// A run going on from checkpoint `at` (a resume, or new input on the thread): applies its
    /// writes if the run that saved it died before it applied them.
    pub(super) async fn replay_store_writes(&self, at: CheckpointId) -> Result<(), RunError> {
        let (Some(_), Some(checkpointer)) = (&self.inherit.store, self.store()) else {
            return Ok(());
        };
        let thread = &self.thread_id;
        let Some(value) = checkpointer.get_journal(thread, &step_key(at)).await? else {
            return Ok(());
        };
        if checkpointer
            .get_journal(thread, &applied_key(at))
            .await?
            .is_some()
        {
            return Ok(());
        }
        let ops: Vec<StoreOp> = self.decode_store_writes(value, "a step's store writes")?;
        tracing::info!(thread = %thread, checkpoint = %at, writes = ops.len(),
            "applying the long-term store writes a killed run saved but did not apply");
        self.apply_store_writes(at, &ops).await
    }

    fn decode_store_writes<T: serde::de::DeserializeOwned>(
        &self,
        value: serde_json::Value,
        what: &str,
    ) -> Result<T, RunError> {
        serde_json::from_value(value)
            .map_err(|e| self.store_failed(format!("{what} do not decode: {e}")))
    }

    fn store_failed(&self, why: String) -> RunError {
        RunError::Store {
            thread_id: self.thread_id.to_string(),
            checkpoint: self.checkpoint_id,
            source: crate::checkpoint::store::StoreError::Backend(why),
        }
    }
}
