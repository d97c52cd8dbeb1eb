//! What every request shares: the store, the assistants (the registry's graphs), the server's
//! records of threads, and the runs of this process.

use super::assistants::Assistants;
use super::runs::Runs;
use super::threads::Catalog;
use super::IdleHook;
use stategraph::checkpoint::{now_ms, Checkpointer};
use stategraph::runtime::SharedStore;
use stategraph_registry::{Registry, SweeperStatus};
use std::sync::Arc;
use tokio::sync::watch;

pub(crate) struct App {
    pub store: Arc<dyn Checkpointer>,
    pub assistants: Assistants,
    pub threads: Catalog,
    pub runs: Runs,
    pub(crate) idle: Option<IdleHook>,
    /// The long-term store its runs' nodes reach (`ctx.store()`), when its owner gave one.
    pub long_term: Option<SharedStore>,
    /// The background retention sweep's progress, when its owner runs one (`GET /retention`).
    pub retention: Option<watch::Receiver<SweeperStatus>>,
    /// When the server started (ms since the epoch): the assistants' creation time.
    pub started_at_ms: u64,
    /// Where new threads' artifact folders go ([`ServerConfig::artifacts_dir`]), set from the
    /// config a router is made with.
    ///
    /// [`ServerConfig::artifacts_dir`]: crate::ServerConfig::artifacts_dir
    pub artifacts_dir: std::sync::RwLock<Option<std::path::PathBuf>>,
}

impl App {
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>, idle: Option<IdleHook>) -> Self {
        App {
            assistants: Assistants::new(registry, store.clone()),
            threads: Catalog::new(store.clone()),
            store,
            runs: Runs::default(),
            idle,
            long_term: None,
            retention: None,
            started_at_ms: now_ms(),
            artifacts_dir: Default::default(),
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
