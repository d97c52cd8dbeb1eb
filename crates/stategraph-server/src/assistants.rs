//! The registered graphs as the API names them: each an assistant whose id is the graph's
//! name, built on first use and attached to the server's store.
//!
//! Below `app.rs`, `threads.rs` and `runs/`: what they need of a graph is here, so none of
//! them reaches up to the whole app for it.

use super::error::ApiError;
use stategraph::checkpoint::Checkpointer;
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

/// The registry's graphs, built once each over the server's store.
pub(crate) struct Assistants {
    pub registry: Registry,
    store: Arc<dyn Checkpointer>,
    /// Built on first use: building a graph is cheap, but not free, and a graph file on disk
    /// is read once, as a `graph` command reads it once.
    built: Mutex<HashMap<String, Arc<Assistant>>>,
}

impl Assistants {
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>) -> Self {
        Assistants {
            registry,
            store,
            built: Mutex::new(HashMap::new()),
        }
    }

    /// The registered graphs' names, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.registry.iter().map(|f| f.name().to_string()).collect()
    }

    /// The assistant `id`, built on first use; 404 for a name no graph is registered under.
    pub fn get(&self, id: &str) -> Result<Arc<Assistant>, ApiError> {
        if let Some(a) = self.lock().get(id) {
            return Ok(a.clone());
        }
        // A registered name, or a graph file of `./graphs/` the listing names by its path
        // (listing builds every graph: only a path is looked for there). A file that cannot be
        // used is resolved below, which says why.
        let listed = || {
            if !Registry::is_path(id) {
                return false;
            }
            let listing = self.registry.listing();
            listing.graphs.iter().any(|g| g.name == id)
                || listing.bad_files.iter().any(|b| b.source == id)
        };
        if self.registry.get(id).is_none() && !listed() {
            return Err(ApiError::not_found(format!(
                "no assistant `{id}`: this server's assistants are its registered graphs ({}) \
                 and the graph files of ./graphs/ (POST /assistants/search lists them)",
                self.ids().join(", ")
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
    pub fn for_graph(&self, graph: &str) -> Option<Arc<Assistant>> {
        if let Ok(a) = self.get(graph) {
            return Some(a);
        }
        self.ids()
            .iter()
            .filter_map(|id| self.get(id).ok())
            .find(|a| a.graph_name() == graph)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Assistant>>> {
        // A panic elsewhere while it was held leaves a map that is still whole.
        self.built.lock().unwrap_or_else(|p| p.into_inner())
    }
}
