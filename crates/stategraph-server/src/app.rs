//! What every request shares: the store, the assistants (the registry's graphs), the server's
//! records of threads, and the runs of this process.

use super::assistants::Assistants;
use super::error::ApiError;
use super::runs::Runs;
use super::threads::Catalog;
use super::{BusyHook, IdleHook, LINGER};
use stategraph::checkpoint::{now_ms, CheckpointError, Checkpointer};
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
    pub(crate) busy: Option<BusyHook>,
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
            busy: None,
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

    /// Lets `thread` go after [`LINGER`], unless a run has it then: a thread just made, whose
    /// first run is likely to come at once and find it taken.
    pub fn idle_later(self: &Arc<Self>, thread: &str) {
        if self.idle.is_none() {
            return;
        }
        let (app, thread) = (self.clone(), thread.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(LINGER).await;
            app.thread_idle(&thread);
        });
    }

    /// Takes `thread` for a run through the busy hook (see [`BusyHook`]), and keeps the idle
    /// hook off it until the returned claim is dropped (then the thread is let go unless a run
    /// of this server has it).
    pub async fn claim(self: &Arc<Self>, thread: &str) -> Result<Claim, ApiError> {
        self.runs.claim(thread);
        let claim = Claim {
            app: self.clone(),
            thread: thread.to_string(),
        };
        if let Some(hook) = &self.busy {
            match hook(thread.to_string()).await {
                Ok(()) | Err(CheckpointError::ThreadNotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(claim)
    }

    /// Calls the idle hook; only under the runs' lock (see [`Runs::next_after`]).
    pub fn release(&self, thread: &str) {
        if let Some(hook) = &self.idle {
            hook(thread);
        }
    }
}

/// A thread a request is about to run (see [`App::claim`]).
pub(crate) struct Claim {
    app: Arc<App>,
    thread: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let app = &self.app;
        app.runs.unclaim(&self.thread, |t| app.release(t));
    }
}
