//! Stopping a run at a step boundary. The engine's cancellation token abandons the step in
//! flight; a queued run asked to stop (cancelled, interrupted, rolled back, or its worker
//! draining) must instead finish the step it is in and save it. So the run's checkpointer is
//! the worker's Postgres handle wrapped in [`Boundary`], which passes every call through and,
//! once a stop was asked, cancels the run's token right after the next checkpoint of the run's
//! thread is committed: the step in flight when the stop was asked is saved whole, and nothing
//! after it is.
//!
//! The token is cancelled as the engine starts its next step, so that step's nodes may be
//! polled once before the engine sees it (the engine races them against the token); they are
//! abandoned, and nothing of that step is kept beyond the results of tasks that finished in
//! that first poll (saved as pending writes, as any finished task's).

use async_trait::async_trait;
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, PendingWrite,
};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Why a run is to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The queue asked (see [`Stop`](stategraph_postgres::queue::Stop)).
    Queue(stategraph_postgres::queue::Stop),
    /// The worker drains: the run goes back to the queue.
    Drain,
}

/// A run's stop: asked (to take effect at the next boundary) or forced (at once).
#[derive(Clone, Default)]
pub(crate) struct StopSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    token: CancellationToken,
    asked: Mutex<Option<Why>>,
    lost: std::sync::atomic::AtomicBool,
}

impl StopSignal {
    /// The token the run is cancelled with.
    pub(crate) fn token(&self) -> CancellationToken {
        self.0.token.clone()
    }

    /// Asks the run to stop at its next step boundary. The queue's stop outranks a drain: a
    /// run cancelled while its worker drains ends cancelled, not queued again.
    pub(crate) fn ask(&self, why: Why) {
        let mut asked = self.0.asked.lock().unwrap_or_else(|p| p.into_inner());
        match (*asked, why) {
            (Some(Why::Queue(_)), Why::Drain) => {}
            _ => *asked = Some(why),
        }
    }

    /// Why the run was asked to stop, if it was.
    pub(crate) fn asked(&self) -> Option<Why> {
        *self.0.asked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run is no longer this worker's: it stops at once, mid-step.
    pub(crate) fn abandon(&self) {
        self.0.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.token.cancel();
    }

    /// Whether the run was abandoned.
    pub(crate) fn lost(&self) -> bool {
        self.0.lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A boundary was reached: a stop asked takes effect.
    fn at_boundary(&self) {
        if self.asked().is_some() {
            self.0.token.cancel();
        }
    }
}

/// The worker's checkpointer as one run sees it: every call passed through, and the run's
/// [`StopSignal`] honoured after each checkpoint of its thread.
pub(crate) struct Boundary {
    inner: Arc<dyn Checkpointer>,
    thread: String,
    signal: StopSignal,
}

impl Boundary {
    pub(crate) fn new(inner: Arc<dyn Checkpointer>, thread: &str, signal: StopSignal) -> Self {
        Boundary {
            inner,
            thread: thread.to_string(),
            signal,
        }
    }
}

#[async_trait]
impl Checkpointer for Boundary {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner.put_checkpoint(record, flush).await?;
        // A subgraph's checkpoint is inside its parent's step: only the run's own count.
        if record.thread_id == self.thread {
            self.signal.at_boundary();
        }
        Ok(())
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        self.inner.get_checkpoint(thread, id).await
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.inner.list_checkpoints(thread, before, limit).await
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner
            .put_writes(thread, checkpoint, writes, flush)
            .await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.inner.get_writes(thread, checkpoint).await
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.inner.get_journal(thread, key).await
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.inner.put_journal(thread, key, value).await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.list_threads().await
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.inner.delete_checkpoints(thread, ids).await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        self.inner.get_lease(thread).await
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.inner.swap_lease(thread, expected, new).await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.inner.flush().await
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        self.inner.snapshot_cost(state_bytes)
    }
}
