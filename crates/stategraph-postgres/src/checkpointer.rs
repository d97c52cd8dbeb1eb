//! The [`Checkpointer`] contract over Postgres: each call goes to the module of its job.

use crate::PostgresCheckpointer;
use async_trait::async_trait;
use stategraph_checkpoint::chunks;
use stategraph_checkpoint::{
    CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, PendingWrite,
};

#[async_trait]
impl Checkpointer for PostgresCheckpointer {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.write_checkpoint(record, flush).await
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        self.read_checkpoint(thread, id).await
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.list(thread, before, limit).await
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.write_pending(thread, checkpoint, writes, flush).await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.read_pending(thread, checkpoint).await
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.read_journal(thread, key).await
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.write_journal(thread, key, value).await
    }

    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        self.journal_keys(thread).await
    }

    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        self.namespaces_of(thread).await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.thread_ids().await
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.remove_thread(thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.remove_checkpoints(thread, ids).await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        self.lease_of(thread).await
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.swap_lease_of(thread, expected, new).await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.flush_all().await
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        // Large snapshots are kept as pieces a thread's snapshots share.
        chunks::shared_snapshot_cost(state_bytes)
    }
}
