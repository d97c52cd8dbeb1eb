//! Saving: checkpoints (snapshot or delta), pending writes, and what exit mode owes at the end.

use super::Run;
use crate::checkpoint::{
    now_ms, CheckpointId, CheckpointMetadata, CheckpointRecord, NodeWrite, PendingWrite, Source,
    StateData,
};
use crate::error::RunError;
use crate::run::config::Durability;
use crate::run::events::Event;
use crate::runtime::persist::{self};
use crate::state::State;

impl<S: State> Run<S> {
    pub(super) fn metadata(&self, source: Source, writers: Vec<String>) -> CheckpointMetadata {
        CheckpointMetadata {
            source,
            writers,
            created_at_ms: now_ms(),
            schema_version: S::VERSION,
            run_id: self.run_id.as_ref().to_owned(),
            graph: self.graph.name().map(str::to_string),
        }
    }

    /// Writes the checkpoint for the current state and frontier (or, in exit mode, notes that
    /// one is owed). In sync mode it is on disk before this returns, unless `flush` is false
    /// (a fresh subgraph's input: see `begin_with_input`).
    pub(super) async fn save_checkpoint(
        &mut self,
        parent: Option<CheckpointId>,
        writes: Vec<NodeWrite>,
        source: Source,
        writers: Vec<String>,
        flush: bool,
    ) -> Result<(), RunError> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        if writer.mode() == Durability::Exit {
            self.unsaved = true;
            self.last_writers = writers;
            return Ok(());
        }
        let delta_bytes: usize = writes.iter().map(|w| w.update.get().len()).sum();
        let state = if parent.is_none() || self.snapshots.wants_snapshot(delta_bytes) {
            // The step's writes are in the state now; let them go before it is encoded.
            drop(writes);
            let raw = persist::to_raw(&*self.state)?;
            let bytes = raw.get().len();
            self.snapshots
                .took_snapshot(bytes, writer.store().snapshot_cost(bytes));
            StateData::Snapshot(raw)
        } else {
            self.snapshots.took_delta(delta_bytes);
            StateData::Delta(writes)
        };
        let next = self.events.is_active().then(|| self.frontier.next_nodes());
        let queues = writer.queues();
        // Written in place, the record borrows the frontier and the writers (moved in, taken
        // back after the write) instead of copying them for every checkpoint; a queued record
        // outlives this call and gets copies.
        let (frontier, metadata) = if queues {
            let metadata = self.metadata(source, writers.clone());
            self.last_writers = writers;
            (self.frontier.clone(), metadata)
        } else {
            (
                std::mem::take(&mut self.frontier),
                self.metadata(source, writers),
            )
        };
        let record = CheckpointRecord {
            thread_id: self.thread_id.as_ref().to_owned(),
            id: self.checkpoint_id,
            parent_id: parent,
            step: self.step,
            state,
            frontier,
            metadata,
        };
        if let Some(writer) = &mut self.writer {
            if queues {
                writer.queue(record).await?;
            } else {
                let written = writer.write(&record, flush).await;
                self.frontier = record.frontier;
                self.last_writers = record.metadata.writers;
                written?;
            }
        }
        self.persisted = Some(self.checkpoint_id);
        if let Some(next) = next {
            let (step, id) = (self.step, self.checkpoint_id.to_string());
            self.events.emit(|| Event::CheckpointSaved {
                namespace: String::new(),
                step,
                checkpoint_id: id,
                next,
            });
        }
        Ok(())
    }

    /// Saves task results against the current checkpoint.
    pub(super) async fn save_pending(
        &mut self,
        writes: Vec<PendingWrite>,
        flush: bool,
    ) -> Result<(), RunError> {
        if writes.is_empty() {
            return Ok(());
        }
        if let Some(store) = self.store() {
            store
                .put_writes(&self.thread_id, self.checkpoint_id, &writes, flush)
                .await?;
        }
        self.pending.extend(writes);
        Ok(())
    }

    /// Writes what the durability mode still owes and flushes.
    pub(crate) async fn finish(&mut self) -> Result<(), RunError> {
        if self.unsaved {
            if let Some(store) = self.store().cloned() {
                let raw = persist::to_raw(&*self.state)?;
                let record = CheckpointRecord {
                    thread_id: self.thread_id.as_ref().to_owned(),
                    id: self.checkpoint_id,
                    parent_id: self.persisted,
                    step: self.step,
                    state: StateData::Snapshot(raw),
                    frontier: self.frontier.clone(),
                    metadata: self.metadata(Source::Loop, self.last_writers.clone()),
                };
                store.put_checkpoint(&record, true).await?;
                self.persisted = Some(self.checkpoint_id);
                self.unsaved = false;
            }
        }
        if let Some(writer) = &mut self.writer {
            // A subgraph's end is not its run's: its queued records are written before its
            // parent's step goes on (so they precede that step's record), and flushed with the
            // parent's at the root's end, on a pause or on a failure (one flush per run, not
            // one per child).
            writer.finish(self.path.is_root()).await?;
        }
        Ok(())
    }
}
