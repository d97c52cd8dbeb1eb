//! What every request shares: the store, the assistants (the registry's graphs), the server's
//! records of threads, and the runs of this process.

use super::assistants::Assistants;
use super::runs::Runs;
use super::threads::Catalog;
use super::IdleHook;
use stategraph::checkpoint::{now_ms, Checkpointer};
use stategraph_registry::Registry;
use std::sync::Arc;

pub(crate) struct App {
    pub store: Arc<dyn Checkpointer>,
    pub assistants: Assistants,
    pub threads: Catalog,
    pub runs: Runs,
    idle: Option<IdleHook>,
    /// When the server started (ms since the epoch): the assistants' creation time.
    pub started_at_ms: u64,
}

impl App {
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>, idle: Option<IdleHook>) -> Self {
        App {
            assistants: Assistants::new(registry, store.clone()),
            threads: Catalog::new(store.clone()),
            store,
            runs: Runs::default(),
            idle,
            started_at_ms: now_ms(),
        }
    }

    /// Tells the store's owner the server stopped writing `thread` for now, unless a run of
    /// this server has it (checked under the lock that admits runs).
    pub fn thread_idle(&self, thread: &str) {
        self.runs.when_idle(thread, |t| self.release(t));
    }

    /// Calls the idle hook; only under the runs' lock (see [`Runs::next_after`]).
    pub fn release(&self, thread: &str) {
        if let Some(hook) = &self.idle {
            hook(thread);
        }
    }
}
