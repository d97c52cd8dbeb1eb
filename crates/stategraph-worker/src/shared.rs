//! What every run of a worker shares: the registry its graphs come from, the store and queue,
//! its options and id, and whether it drains. Below both the worker's claim loop
//! (`worker.rs`) and a run's execution (`exec.rs`).

use crate::options::WorkerOptions;
use stategraph_postgres::queue::RunQueue;
use stategraph_postgres::PostgresCheckpointer;
use stategraph_registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What every run of the worker shares.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) store: Arc<PostgresCheckpointer>,
    pub(crate) queue: RunQueue,
    pub(crate) options: WorkerOptions,
    pub(crate) id: String,
    /// Cancelled when the worker drains.
    pub(crate) draining: CancellationToken,
    /// How many claim loops run (`run` may be called once at a time, but is not refused twice).
    pub(crate) loops: watch::Sender<usize>,
}
