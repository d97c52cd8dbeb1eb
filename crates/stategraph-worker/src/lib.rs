//! Workers of stategraph's Postgres run queue: a [`Worker`] claims queued runs, builds each
//! run's graph from a [`Registry`](stategraph_registry::Registry), runs or resumes it on the
//! Postgres checkpointer, and records how it ended; `graph worker` is a face over it.
//!
//! What a worker promises (the queue's storage is `stategraph_postgres::queue`):
//! - a run is run by one worker at a time: claimed under a fenced lease renewed by heartbeats,
//!   and its thread held under the engine's lease, whose every write is fenced too;
//! - a worker that dies (SIGKILL) loses its leases when they lapse, and another worker takes its
//!   runs over from their threads' last checkpoints: no saved step runs again;
//! - a cancellation is stored state: a run cancelled before it is claimed never runs, a running
//!   one stops at its next step boundary (the step in flight saved, no node of the next one
//!   started), and a worker that takes over a run asked to stop ends it without running it; a
//!   stop stored while the run's last step is in flight holds too (the run ends cancelled);
//! - what an operator needs is logged at [`LOG_DEFAULT`]: a run claimed, taken over, ended or
//!   failed, a lease lost, the database gone and back (`warn` for the troubles);
//! - a run that pauses for an answer frees its worker; the answer is a new run (a resume);
//! - [`Worker::drain`] (what SIGTERM does) finishes each run's current step, saves it, gives
//!   the run back to the queue and lets its leases go, so another worker continues at once.
//!
//! # Layout
//! - [`Worker`] (`worker.rs`): the claim loop, `concurrency` runs at once, and draining.
//! - `exec.rs`: one claimed run: its graph resolved and built, where it starts (input, answer,
//!   or a takeover's continuation), heartbeats beside it, its outcome recorded, a rollback's
//!   checkpoints dropped.
//! - `stop.rs`: a run's stop signal: a stop asked drains the run through the engine's
//!   `RunControl` (the step in flight finished and saved, no other started); a run lost is
//!   cancelled at once.
//! - [`WorkerOptions`] (`options.rs`): the database, concurrency, lease and heartbeat periods.
//! - `shared.rs`: what the claim loop and every run share (registry, store, queue, draining).
//!
//! ```no_run
//! # async fn demo(registry: stategraph_registry::Registry) -> Result<(), stategraph_worker::WorkerError> {
//! use stategraph_worker::{Worker, WorkerOptions};
//! let worker = Worker::connect(registry, WorkerOptions::new("postgres://app@db/agents").concurrency(4)).await?;
//! let drainer = worker.clone();
//! tokio::spawn(async move {
//!     let _ = tokio::signal::ctrl_c().await;
//!     drainer.drain().await;
//! });
//! let report = worker.run().await?;
//! # let _ = report;
//! # Ok(()) }
//! ```
//!
//! Invariant: the worker knows the registry, the engine and the queue, never a command line nor
//! an agent; it prints nothing (what happened is in the queue, and in `tracing`).

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod exec;
mod options;
mod shared;
mod stop;
mod worker;

pub use options::WorkerOptions;
pub use worker::{Worker, WorkerReport};

use stategraph_postgres::queue::QueueError;
use stategraph_postgres::ConnectError;

/// The `tracing` target of a worker's `node started` lines (`info`, one per node a run
/// begins, with run, thread, step, node, task and attempt), apart from its other lines so a
/// host can leave them out by default and show them when asked.
///
/// ```
/// assert!(stategraph_worker::LOG_DEFAULT.contains(stategraph_worker::NODE_LOG));
/// ```
pub const NODE_LOG: &str = "stategraph_worker::nodes";

/// The log filter (`tracing_subscriber::EnvFilter` syntax) a worker's host uses by default:
/// every warning (a run taken over, a lease lost, a run failed, the database gone and back)
/// and the worker's few `info` lines (a run claimed, a run ended), without a line per node.
pub const LOG_DEFAULT: &str = "warn,stategraph_worker=info,stategraph_worker::nodes=warn";

/// What stops a worker. A run's own failure is not one: it is recorded in the queue as the
/// run's outcome, and the worker goes on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The database could not be reached or its schema is not this build's.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The queue failed in a way the worker cannot wait out.
    #[error(transparent)]
    Queue(#[from] QueueError),
}
