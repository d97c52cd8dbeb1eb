//! What every session and every call of a server shares: the registry, the store, the keeper,
//! the threads a run of this process is on, and the server's stop.

use crate::keeper::ThreadKeeper;
use crate::Registry;
use stategraph_checkpoint::Checkpointer;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What every session and every call shares.
pub(crate) struct Shared {
    pub registry: Registry,
    pub store: Arc<dyn Checkpointer>,
    pub keeper: Arc<dyn ThreadKeeper>,
    /// The threads a run of this process is on: one run per thread, the others refused.
    busy: Mutex<HashSet<String>>,
    /// Told when a run lets its thread go.
    freed: Notify,
    /// Cancelled when the server stops: each run stops at its next step boundary, keeping its
    /// last checkpoint.
    pub stop: CancellationToken,
}

/// A thread taken by a run of this process until this is dropped.
pub(crate) struct Taken<'a> {
    shared: &'a Shared,
    thread: String,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.shared.lock_busy().remove(&self.thread);
        self.shared.freed.notify_waiters();
    }
}

impl Shared {
    pub fn new(
        registry: Registry,
        store: Arc<dyn Checkpointer>,
        keeper: Arc<dyn ThreadKeeper>,
        stop: CancellationToken,
    ) -> Self {
        Shared {
            registry,
            store,
            keeper,
            busy: Mutex::default(),
            freed: Notify::new(),
            stop,
        }
    }

    /// Takes `thread` for a run; `None` when a run of this process has it.
    pub fn take(&self, thread: &str) -> Option<Taken<'_>> {
        self.lock_busy().insert(thread.to_string()).then(|| Taken {
            shared: self,
            thread: thread.to_string(),
        })
    }

    /// Whether a run of this process is on `thread`.
    pub fn is_running(&self, thread: &str) -> bool {
        self.lock_busy().contains(thread)
    }

    /// Completes once no run of this process is going.
    pub async fn idle(&self) {
        loop {
            let freed = self.freed.notified();
            if self.lock_busy().is_empty() {
                return;
            }
            freed.await;
        }
    }

    fn lock_busy(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // A panic while it was held leaves a set that is still whole.
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }
}
