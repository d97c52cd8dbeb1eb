//! What the owner of the store keeps beside a thread. The server runs threads through the
//! checkpoint contract alone; a program that keeps records of its own with its threads (the
//! `graph` command keeps how each was started, and its folder store lets a quiet thread go so
//! another process can take it) passes a [`ThreadKeeper`], so a thread started here continues
//! there and the other way round.

use async_trait::async_trait;
use stategraph_registry::Resolved;

/// Why a keeper could not do its part; the client reads it in a tool error.
pub type KeeperError = Box<dyn std::error::Error + Send + Sync>;

/// The store owner's part in a thread's life. Every method has a default that keeps nothing.
///
/// ```
/// use stategraph_mcp_server::{KeeperError, ThreadKeeper};
/// struct Log;
/// #[async_trait::async_trait]
/// impl ThreadKeeper for Log {
///     async fn started(&self, thread: &str, graph: &stategraph_registry::Resolved) -> Result<(), KeeperError> {
///         tracing::info!(thread, graph = %graph.file.graph, "started");
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait ThreadKeeper: Send + Sync + 'static {
    /// A run of `graph` is about to start on the new `thread`, before its first step: keep what
    /// continuing it elsewhere needs. An error leaves no thread behind and fails the call.
    async fn started(&self, thread: &str, graph: &Resolved) -> Result<(), KeeperError> {
        let _ = (thread, graph);
        Ok(())
    }

    /// A run is about to continue `thread`: hold it for this process, where a store lets one
    /// process write a thread at a time. An error (another process writes it now) fails the
    /// call with nothing changed.
    async fn taking(&self, thread: &str) -> Result<(), KeeperError> {
        let _ = thread;
        Ok(())
    }

    /// The graph `thread` runs with, as the owner recorded it (its graph file, its overrides);
    /// `Ok(None)` when it has no record, and the graph its checkpoints name is used. A record
    /// that cannot be read is an error: the thread is not continued without it.
    async fn graph_of(&self, thread: &str) -> Result<Option<Resolved>, KeeperError> {
        let _ = thread;
        Ok(None)
    }

    /// The server stopped writing `thread` for now (its run ended): a store that holds threads
    /// for the process writing them lets it go here (flushed). An error after a run that ended
    /// well fails the call: what the run saved may not be on disk.
    fn idle(&self, thread: &str) -> Result<(), KeeperError> {
        let _ = thread;
        Ok(())
    }
}

/// Keeps nothing: threads are known by their checkpoints alone.
pub(crate) struct NoKeeper;

impl ThreadKeeper for NoKeeper {}
