//! The long-term store as a run holds it: the [`SharedStore`] a caller gives
//! ([`RunConfig::with_store`](crate::run::config::RunConfig::with_store)) and the
//! [`StoreLink`] the run's tasks and subgraphs share, which remembers which attempt of each task
//! staged writes, so a retry's stale journal entry is never applied. What a node sees of the
//! store is `store.rs`'s.

use crate::checkpoint::store::Store;
use crate::checkpoint::CheckpointId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A long-term store given to a run ([`RunConfig::store`](crate::run::config::RunConfig::store)).
///
/// ```
/// use std::sync::Arc;
/// use stategraph::checkpoint::store::MemoryStore;
/// use stategraph::runtime::{RunConfig, SharedStore};
/// let config = RunConfig::new().with_store(SharedStore(Arc::new(MemoryStore::new())));
/// assert!(config.store.is_some());
/// ```
#[derive(Clone)]
pub struct SharedStore(pub Arc<dyn Store>);

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedStore")
    }
}

/// (thread, checkpoint, task) -> the attempt whose journal entry holds the task's writes.
type Staged = BTreeMap<(Arc<str>, CheckpointId, usize), u32>;

/// The store as a run and its subgraphs share it, with which tasks staged writes in which
/// attempt (so a retry's stale entry is never applied).
pub(crate) struct StoreLink {
    pub(crate) store: Arc<dyn Store>,
    staged: Mutex<Staged>,
}

impl std::fmt::Debug for StoreLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreLink")
    }
}

impl StoreLink {
    pub(crate) fn new(store: &SharedStore) -> Arc<Self> {
        Arc::new(StoreLink {
            store: store.0.clone(),
            staged: Mutex::default(),
        })
    }

    fn staged(&self) -> std::sync::MutexGuard<'_, Staged> {
        // Each entry is inserted or removed whole: a poisoned lock holds no torn one.
        match self.staged.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A new attempt of the task begins: what earlier attempts staged is dropped.
    pub(crate) fn forget(&self, thread: &Arc<str>, at: CheckpointId, task: usize) {
        self.staged().remove(&(thread.clone(), at, task));
    }

    /// The attempt of this run whose entry holds task `task`'s writes, if it staged any.
    pub(crate) fn staged_by(
        &self,
        thread: &Arc<str>,
        at: CheckpointId,
        task: usize,
    ) -> Option<u32> {
        self.staged().get(&(thread.clone(), at, task)).copied()
    }

    /// The step at `at` is over: its tasks' notes are no longer needed.
    pub(crate) fn forget_checkpoint(&self, thread: &Arc<str>, at: CheckpointId) {
        self.staged()
            .retain(|(t, c, _), _| !(t == thread && *c == at));
    }

    pub(crate) fn note(&self, thread: &Arc<str>, at: CheckpointId, task: usize, attempt: u32) {
        self.staged().insert((thread.clone(), at, task), attempt);
    }
}
