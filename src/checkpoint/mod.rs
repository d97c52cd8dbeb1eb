//! Durable checkpoints: the storage contract, its backends, and the typed layer that turns
//! stored records back into a graph's state.
//!
//! - [`Checkpointer`] is the contract every backend implements. It moves records, not states: it
//!   knows nothing of nodes or of the state's type, and nothing sled-specific appears in it, so a
//!   Postgres backend can implement it as well.
//! - [`MemoryCheckpointer`] keeps records in memory (tests, short-lived runs).
//! - [`SledCheckpointer`] keeps them in one sled directory on disk (the default).
//! - [`FolderCheckpointer`] keeps one sled store per thread in a folder per thread: what the
//!   `graph` command uses, so threads can be read and run from several processes at once.
//! - Every record goes through [`codec`]: checksummed framing, so a damaged record is reported as
//!   such and never read as an empty or default state.
//!
//! Invariant: backends never interpret the state; the runtime never names a backend.

mod chunks;
pub mod codec;
mod compact;
mod error;
mod folders;
mod group_commit;
mod io_failure;
mod memory;
mod record;
mod sled_store;
pub(crate) mod status;

pub use error::{validate_thread_id, CheckpointError};
pub use folders::{Damage, FolderCheckpointer, RepairReport, ThreadListing};
pub(crate) use folders::{Origin, ORIGIN_KEY};
pub use memory::MemoryCheckpointer;
pub use record::*;
pub use sled_store::{SledCheckpointer, SledOptions};
pub use status::{record_verdict, summarize, TaskError, ThreadStatus, ThreadSummary, Verdict};

use async_trait::async_trait;

/// Where checkpoints live. All methods are about one thread at a time, except
/// [`Checkpointer::list_threads`].
///
/// Durability: when `flush` is true the call returns only once the record is on disk (for an
/// on-disk backend). Records are written in call order: a record that survives a crash implies
/// every record written before it survived too.
#[async_trait]
pub trait Checkpointer: Send + Sync + 'static {
    /// Saves a checkpoint.
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError>;

    /// Loads a checkpoint by id, or the thread's newest one when `id` is `None`.
    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError>;

    /// The thread's checkpoints, newest first, strictly older than `before` when given, at most
    /// `limit` of them.
    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError>;

    /// Saves task results against the checkpoint they started from.
    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError>;

    /// The task results saved against a checkpoint, in the order they were saved.
    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError>;

    /// A recorded call result (see `Context::record`), if one was saved under `key`.
    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError>;

    /// Records a call result under `key`. Always flushed: the caller paid for it.
    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError>;

    /// The ids of every thread with at least one checkpoint.
    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError>;

    /// Removes a thread: its checkpoints, writes, journal and lease.
    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError>;

    /// Removes some checkpoints of a thread, with their writes and journal entries.
    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError>;

    /// The thread's current lease, if any (expired or not).
    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError>;

    /// Atomically replaces the thread's lease with `new` if it currently equals `expected`.
    /// Returns the lease found when it did not.
    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError>;

    /// Makes everything written so far durable.
    async fn flush(&self) -> Result<(), CheckpointError>;

    /// What storing a snapshot of `state_bytes` bytes of JSON costs this store, in bytes, when
    /// the thread's previous snapshot held much the same state. The runtime weighs it against
    /// the deltas a snapshot saves a reader from replaying, so a store that shares unchanged
    /// content between snapshots gets them more often and reads stay short.
    ///
    /// The default is the state's size: every snapshot stored whole. Both built-in stores keep
    /// large snapshots as shared pieces and answer accordingly.
    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        state_bytes
    }
}
