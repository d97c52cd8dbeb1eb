//! A Postgres checkpointer for stategraph: many processes, on many machines, share one database
//! and keep every promise of the embedded store: no saved step runs again, one writer per
//! thread, damage detected, nothing lost.
//!
//! Every write of a thread is *fenced*: a lease carries an epoch that changes whenever the
//! lease changes hands, and a write from a handle whose lease was taken over is refused inside
//! the write's own transaction, so a paused or partitioned worker can never add to a thread
//! another worker took over (the chain never forks, LangGraph #8796). Records are the codec's
//! checksummed bytes in `BYTEA` (never JSONB: a NUL character is data, LangGraph #1878); ids and
//! keys of any length are indexed by a fixed-size hash (LangGraph #6239); large states are
//! stored as pieces named by their content, shared by a thread's snapshots.
//!
//! # Layout
//! - [`PostgresCheckpointer`] (here); `checkpointer.rs` is its
//!   [`Checkpointer`](stategraph_checkpoint::Checkpointer) impl, which only routes each call to
//!   the module of its job.
//! - `connect/`: [`PostgresOptions`] and the pool (deadpool-postgres), TLS for `sslmode=require`
//!   (`tls.rs`), and what a failure says: host, authentication, database ([`ConnectError`],
//!   `failure.rs`).
//! - `schema/`: the tables, created and migrated by the program in versions (`sql/`), and the
//!   refusal to run on a database whose schema is newer than this build.
//! - `transaction.rs`: how a write reaches the database: a record's write is one statement (the
//!   fence, the thread's row, the record) committed on its own; other writes one transaction,
//!   the fence first, sent in one round trip when no piece must be looked up.
//! - `leases.rs`: leases, their epochs, and the fence every write passes.
//! - `write_failure.rs`: a failed write (the database's error or the store's) and whether the
//!   fence refused it.
//! - `records.rs`: checkpoints, pending writes and the journal; `threads.rs`: listing threads,
//!   deleting one with its subgraphs, pruning checkpoints.
//! - `pieces.rs`: pieces of large records, fetched an index level at a time, and swept.
//! - `keys.rs`: how thread ids and journal keys become fixed-size keys.
//! - `inspect.rs`: what tests read and damage beyond the contract.
//! - [`PostgresCache`] (`cache.rs`, schema version 3): the node cache, on the checkpointer's
//!   pool, shared by every process of the database.
//! - `item_store.rs`: [`PostgresStore`], the long-term store (schema version 4): items across
//!   threads by namespace and key, one transaction per batch.
//! - [`queue`]: the run queue (schema version 2): submitting runs with a strategy for a busy
//!   thread, claiming them under fenced leases renewed by heartbeats, outcomes, cancellation as
//!   stored state, listing (`submit.rs`, `claim.rs`, `list.rs`). It stores runs; running them
//!   is `stategraph-worker`'s job.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stategraph_checkpoint::Checkpointer;
//! use stategraph_postgres::PostgresCheckpointer;
//! # async fn demo() -> Result<(), stategraph_postgres::ConnectError> {
//! let saver = PostgresCheckpointer::connect("postgres://app:secret@db.internal/agents").await?;
//! let saver: Arc<dyn Checkpointer> = Arc::new(saver);
//! # let _ = saver;
//! # Ok(())
//! # }
//! ```
//!
//! The schema, the lease and fencing protocol and why the order of writes is crash-safe are in
//! this crate's README.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cache;
mod checkpointer;
mod connect;
mod inspect;
mod item_store;
mod keys;
mod leases;
mod pieces;
pub mod queue;
mod records;
mod schema;
mod threads;
mod transaction;
mod write_failure;

pub use cache::PostgresCache;
pub use connect::{ConnectError, PostgresOptions};
pub use item_store::PostgresStore;
pub use schema::SCHEMA_VERSION;

use connect::Target;
use leases::HeldEpochs;
use std::sync::Arc;

/// Checkpoints in a Postgres database, shared by every process that connects to it.
///
/// One value is one handle: a pool of connections (deadpool-postgres) and the leases this
/// handle took. Share it between runs with an `Arc`; a second process, or a second worker,
/// opens its own. Connecting creates the tables, or migrates them, and refuses a database whose
/// schema is newer than this build ([`ConnectError::SchemaTooNew`]).
///
/// Durability: a write with `flush = true` returns once Postgres committed it with the server's
/// `synchronous_commit` (on by default: on disk); `flush = false` commits without waiting for
/// the disk, and [`flush`](stategraph_checkpoint::Checkpointer::flush) waits for everything
/// before it. Postgres writes its log in commit order, so a crash loses at most the newest
/// commits, never one before a kept one.
pub struct PostgresCheckpointer {
    pool: deadpool_postgres::Pool,
    target: Arc<Target>,
    held: HeldEpochs,
    flushes: std::sync::atomic::AtomicU32,
}

impl PostgresCheckpointer {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`, or
    /// `host=... user=...`) with the default [`PostgresOptions`], and creates or migrates the
    /// schema. A failure says what failed, within about a second for a host that does not
    /// answer.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// use stategraph_postgres::{ConnectError, PostgresCheckpointer};
    /// match PostgresCheckpointer::connect("postgres://app@127.0.0.1:1/agents").await {
    ///     Err(ConnectError::Unreachable { target, .. }) => assert_eq!(target, "127.0.0.1:1"),
    ///     other => panic!("{:?}", other.err()),
    /// }
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(PostgresOptions::new(url)).await
    }

    /// Connects with chosen options (pool size, timeouts).
    pub async fn connect_with(options: PostgresOptions) -> Result<Self, ConnectError> {
        let (pool, target) = connect::open(&options).await?;
        Ok(PostgresCheckpointer {
            pool,
            target: Arc::new(target),
            held: HeldEpochs::default(),
            flushes: std::sync::atomic::AtomicU32::new(std::process::id()),
        })
    }

    /// Where this handle connects (host and port, or socket, and database), as errors name it.
    /// Never holds the password.
    pub fn target(&self) -> String {
        self.target.to_string()
    }

    /// A connection from the pool.
    async fn client(
        &self,
    ) -> Result<deadpool_postgres::Object, stategraph_checkpoint::CheckpointError> {
        self.pool.get().await.map_err(|e| self.target.pool_error(e))
    }
}
