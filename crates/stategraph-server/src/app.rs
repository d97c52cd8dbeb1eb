//! What every request shares: the registry and its assistants, the store, the server's records
//! of threads, and the runs of this process.

use super::error::ApiError;
use super::runs::Runs;
use super::threads::Catalog;
use super::IdleHook;
use stategraph::checkpoint::{now_ms, Checkpointer};
use stategraph_registry::{ErasedGraph, Registry, Resolved};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A registered graph as the API names it: an assistant whose id is the graph's name.
pub(crate) struct Assistant {
    /// The graph's registered name (also its assistant id and graph id).
    pub id: String,
    /// Its graph file, as resolved (for the checks a run makes before it starts).
    pub resolved: Resolved,
    /// The graph, attached to the store.
    pub graph: Arc<dyn ErasedGraph>,
}

impl Assistant {
    /// The name its checkpoints give it (the compiled graph's own name).
    pub fn graph_name(&self) -> &str {
        self.graph.name()
    }
}

pub(crate) struct App {
    pub registry: Registry,
    pub store: Arc<dyn Checkpointer>,
    /// Built on first use: building a graph is cheap, but not free, and a graph file on disk
    /// is read once, as a `graph` command reads it once.
    assistants: Mutex<HashMap<String, Arc<Assistant>>>,
    pub threads: Catalog,
    pub runs: Runs,
    idle: Option<IdleHook>,
    /// When the server started (ms since the epoch): the assistants' creation time.
    pub started_at_ms: u64,
}

impl App {
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>, idle: Option<IdleHook>) -> Self {
        App {
            registry,
            store,
            assistants: Mutex::new(HashMap::new()),
            threads: Catalog::default(),
            runs: Runs::default(),
            idle,
            started_at_ms: now_ms(),
        }
    }

    /// The registered graphs' names, sorted.
    pub fn assistant_ids(&self) -> Vec<String> {
        self.registry.iter().map(|f| f.name().to_string()).collect()
    }

    /// The assistant `id`, built on first use; 404 for a name no graph is registered under.
    pub fn assistant(&self, id: &str) -> Result<Arc<Assistant>, ApiError> {
        if let Some(a) = self.lock().get(id) {
            return Ok(a.clone());
        }
        if self.registry.get(id).is_none() {
            return Err(ApiError::not_found(format!(
                "no assistant `{id}`: this server's assistants are its registered graphs: {}",
                self.assistant_ids().join(", ")
            )));
        }
        let resolved = self.registry.resolve(id, &[])?;
        let graph: Arc<dyn ErasedGraph> = Arc::from(resolved.build(Some(self.store.clone()))?);
        let assistant = Arc::new(Assistant {
            id: id.to_string(),
            resolved,
            graph,
        });
        self.lock()
            .entry(id.to_string())
            .or_insert(assistant.clone());
        Ok(assistant)
    }

    /// The assistant whose graph wrote checkpoints naming `graph`: the one registered under
    /// that name, else one whose compiled graph carries it.
    pub fn assistant_for_graph(&self, graph: &str) -> Option<Arc<Assistant>> {
        if let Ok(a) = self.assistant(graph) {
            return Some(a);
        }
        self.assistant_ids()
            .iter()
            .filter_map(|id| self.assistant(id).ok())
            .find(|a| a.graph_name() == graph)
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Assistant>>> {
        // A panic elsewhere while it was held leaves a map that is still whole.
        self.assistants.lock().unwrap_or_else(|p| p.into_inner())
    }
}
