//! How a thread was started: the graph as given to `run` and its `--set` overrides, kept in the
//! thread's own store (its journal), so `resume`, `state` and the rest build the same graph.
//!
//! It is the one thing the CLI stores beside the checkpoints, and it is stored with them, not in
//! an index: whatever lists threads is derived from the stores.

use crate::checkpoint::{now_ms, CheckpointError, Checkpointer, FolderCheckpointer};
use serde::{Deserialize, Serialize};

/// The journal key the origin is kept under. Journal keys written by nodes start with a
/// checkpoint id, so this one cannot collide with them, and pruning keeps it.
const ORIGIN_KEY: &str = "graph/origin";

/// How a thread was started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Origin {
    /// The registered graph.
    pub graph: String,
    /// The graph as given to `run`: a registered name or an absolute file path.
    pub graph_file: String,
    /// `--set` overrides given to `run` (and later commands), applied again on resume.
    #[serde(default)]
    pub overrides: Vec<String>,
    /// When the thread was started (ms since the epoch).
    pub created_at_ms: u64,
}

impl Origin {
    pub(crate) fn new(graph: &str, graph_file: &str, overrides: Vec<String>) -> Self {
        Origin {
            graph: graph.to_string(),
            graph_file: graph_file.to_string(),
            overrides,
            created_at_ms: now_ms(),
        }
    }

    /// The thread's origin: as stored with it, else as an earlier version of the layout kept it
    /// (its `meta.json`); `None` when neither says.
    pub(crate) async fn read(
        store: &FolderCheckpointer,
        thread: &str,
    ) -> Result<Option<Origin>, CheckpointError> {
        if let Some(value) = store.get_journal(thread, ORIGIN_KEY).await? {
            return Ok(serde_json::from_value(value).ok());
        }
        Ok(store.legacy_meta(thread).and_then(|meta| {
            Some(Origin {
                graph: meta.get("graph")?.as_str()?.to_string(),
                graph_file: meta.get("graph_file")?.as_str()?.to_string(),
                overrides: serde_json::from_value(meta.get("overrides")?.clone()).ok()?,
                created_at_ms: meta.get("created_at_ms")?.as_u64()?,
            })
        }))
    }

    /// Stores it with the thread (flushed).
    pub(crate) async fn write(
        &self,
        store: &FolderCheckpointer,
        thread: &str,
    ) -> Result<(), CheckpointError> {
        let value = serde_json::to_value(self).map_err(CheckpointError::storage)?;
        store.put_journal(thread, ORIGIN_KEY, &value).await
    }
}
