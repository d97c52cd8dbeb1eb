//! The checkpoint contract of stategraph: what every store of checkpoints implements, and the
//! record formats they move. It knows no graph type: a backend built on it moves records and
//! never interprets a state.
//!
//! # Layout
//! - [`Checkpointer`] (here): the contract, one thread at a time.
//! - `record.rs`: the records (checkpoints, pending writes, leases), a long-lived format whose
//!   fields are only added.
//! - [`codec`]: checksummed framing shared by all backends, so a damaged record is reported as
//!   such and never read as an empty or default state; `compact.rs` is the binary layout of
//!   checkpoints inside a frame.
//! - [`chunks`]: a large snapshot cut by content into pieces named by their hash, shared by a
//!   thread's snapshots; `chunk_root.rs` is how a stored record names such pieces (below the
//!   codec, the compact layout and `chunks`, which all use it).
//! - [`group_commit`]: runs flushing one store at the same time share flushes.
//! - `status.rs`: where a thread stands, from its records alone.
//! - `thread_key.rs`: how a subgraph's records are keyed inside its root thread's.
//! - [`MemoryCheckpointer`] (`memory.rs`): records in memory (tests, short-lived runs).
//! - [`CheckpointerLayer`] (`layer.rs`): a store in front of another that changes some calls
//!   (counts, fails, logs them) and passes every other one through, new ones included.
//! - [`store`]: the long-term store's contract (items across threads, `put`/`get`/`search`),
//!   its records and [`MemoryStore`](store::MemoryStore); beside checkpoints because its
//!   on-disk backends live in the same crates as theirs.
//! - `cache.rs`: the node cache contract ([`NodeCache`]): a node's result kept per input, shared
//!   by threads and runs; its framing, default key and [`MemoryCache`].
//! - [`backend`]: what a backend in another crate needs beyond the records (error helpers).
//!
//! The on-disk backends live in `stategraph-sled`; the checks every backend must pass live in
//! `stategraph-checkpoint-conformance`.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cache;
mod chunk_root;
pub mod chunks;
pub mod codec;
mod compact;
mod error;
pub mod group_commit;
mod layer;
mod memory;
mod record;
mod status;
pub mod store;
mod thread_key;

pub use cache::{
    decode_entry, default_cache_key, encode_entry, CacheEntry, CacheError, CacheKey, MemoryCache,
    NodeCache,
};
pub use error::{validate_thread_id, CheckpointError, SealFault};
pub use layer::CheckpointerLayer;
pub use memory::MemoryCheckpointer;
pub use record::*;
pub use status::{
    pending_interrupts, record_verdict, summarize, task_errors, waiting_interrupts, TaskError,
    ThreadStatus, ThreadSummary, Verdict, Waiting,
};
pub use thread_key::{is_root_thread, root_thread, NAMESPACE_SEPARATOR};

/// What a backend in another crate needs to report damage the way the built-in ones do.
pub mod backend {
    pub use crate::error::{corrupt, encode};
}

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

    /// The keys of every journal entry recorded for `thread`, in byte order. `thread` is one
    /// thread or one subgraph namespace (`{root}/{ns}`): a root's listing holds its own keys,
    /// not its namespaces'. A thread with no journal lists nothing. A read: it writes nothing.
    ///
    /// Every backend answers truly (there is no default): whatever rewrites a thread's records
    /// (re-sealing them under a new key, copying a thread) finds its journal entries here.
    ///
    /// ```
    /// use stategraph_checkpoint::{Checkpointer, MemoryCheckpointer};
    /// # async fn demo() -> Result<(), stategraph_checkpoint::CheckpointError> {
    /// let store = MemoryCheckpointer::new();
    /// store.put_journal("t1", "b", &serde_json::json!(2)).await?;
    /// store.put_journal("t1", "a", &serde_json::json!(1)).await?;
    /// store.put_journal("t1/review:0a1b", "c", &serde_json::json!(3)).await?;
    /// assert_eq!(store.list_journal("t1").await?, vec!["a", "b"]);
    /// assert_eq!(store.list_journal("t1/review:0a1b").await?, vec!["c"]);
    /// # Ok(()) }
    /// ```
    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError>;

    /// The subgraph namespaces under `thread` (`{thread}/{ns}`, at every depth) that hold at
    /// least one checkpoint, in byte order: what goes with `thread` when it is deleted, and
    /// what a rewrite of its records (a re-seal under a new key) must reach besides it. A read.
    ///
    /// ```
    /// use stategraph_checkpoint::{Checkpointer, MemoryCheckpointer};
    /// # async fn demo() -> Result<(), stategraph_checkpoint::CheckpointError> {
    /// let store = MemoryCheckpointer::new();
    /// assert!(store.list_namespaces("t1").await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError>;

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
