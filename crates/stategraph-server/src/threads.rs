//! The server's own record of a thread: the metadata a client gave it, the graph it belongs to,
//! when it was made. Kept in the thread's journal (flushed), so it lives and dies with the
//! thread's checkpoints in whatever store holds them; cached here, since only this server
//! writes it.
//!
//! A thread another program started (`graph run`) has no record: it reads as one made when its
//! newest checkpoint was, with no metadata, belonging to the graph its checkpoints name.

use super::assistants::{Assistant, Assistants};
use super::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use stategraph::checkpoint::{validate_thread_id, Checkpointer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The journal key of the server's record of a thread (see ARCHITECTURE.md, "Journal keys").
pub const THREAD_RECORD_KEY: &str = "server/thread";

/// What the server keeps about a thread beside its checkpoints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ThreadRecord {
    /// When it was made (ms since the epoch).
    pub created_at_ms: u64,
    /// When its record last changed (its checkpoints say when its state did).
    pub updated_at_ms: u64,
    /// The client's metadata (`graph_id` among it once a run has named the graph).
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

impl ThreadRecord {
    pub fn new(now_ms: u64, metadata: Map<String, Value>) -> Self {
        ThreadRecord {
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            metadata,
        }
    }

    /// The graph the thread belongs to, as its metadata names it.
    pub fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Value::as_str)
    }
}

/// The records of threads in the server's store, and those this server has read or written,
/// by thread.
pub(crate) struct Catalog {
    store: Arc<dyn Checkpointer>,
    known: Mutex<HashMap<String, ThreadRecord>>,
}

impl Catalog {
    pub fn new(store: Arc<dyn Checkpointer>) -> Self {
        Catalog {
            store,
            known: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ThreadRecord>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, thread: &str, record: ThreadRecord) {
        self.lock().insert(thread.to_string(), record);
    }

    pub fn forget(&self, thread: &str) {
        self.lock().remove(thread);
    }

    /// Threads known here, including those with no checkpoint yet (which a store's listing
    /// leaves out).
    pub fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// The thread's record: as this server keeps it, else one read from its newest checkpoint;
    /// `None` when the thread does not exist.
    pub async fn read(&self, thread: &str) -> Result<Option<ThreadRecord>, ApiError> {
        check_id(thread)?;
        // A kept record that names no graph is read again: another server over the same
        // database may have run the thread since (its first run names the graph).
        if let Some(r) = self.lock().get(thread).cloned() {
            if r.graph_id().is_some() {
                return Ok(Some(r));
            }
        }
        let record = match self.store.get_journal(thread, THREAD_RECORD_KEY).await? {
            Some(value) => serde_json::from_value::<ThreadRecord>(value).map_err(|e| {
                ApiError::internal(format!(
                    "the server's record of thread `{thread}` (journal entry {THREAD_RECORD_KEY}) \
                     cannot be read: {e}; nothing was changed"
                ))
            })?,
            None => match self.store.get_checkpoint(thread, None).await? {
                Some(newest) => {
                    let mut metadata = Map::new();
                    if let Some(graph) = newest.metadata.graph {
                        metadata.insert("graph_id".into(), Value::String(graph));
                    }
                    let at = newest.metadata.created_at_ms;
                    ThreadRecord::new(at, metadata)
                }
                None => return Ok(None),
            },
        };
        self.remember(thread, record.clone());
        Ok(Some(record))
    }

    /// The thread's record, or a 404 naming the thread.
    pub async fn require(&self, thread: &str) -> Result<ThreadRecord, ApiError> {
        self.read(thread).await?.ok_or_else(|| not_found(thread))
    }

    /// Saves the record with the thread (flushed) and caches it.
    pub async fn write(&self, thread: &str, record: &ThreadRecord) -> Result<(), ApiError> {
        let value = serde_json::to_value(record).map_err(ApiError::internal)?;
        self.store
            .put_journal(thread, THREAD_RECORD_KEY, &value)
            .await?;
        self.remember(thread, record.clone());
        Ok(())
    }
}

/// Refuses an id that cannot name a thread in every store (empty, too long, a path separator,
/// a leading dot).
pub(crate) fn check_id(thread: &str) -> Result<(), ApiError> {
    validate_thread_id(thread).map_err(|e| ApiError::invalid("thread_id", e))?;
    if thread.starts_with('.') {
        return Err(ApiError::invalid(
            "thread_id",
            format!("invalid thread id `{thread}`: it starts with a dot (reserved for stores' own files)"),
        ));
    }
    Ok(())
}

/// 404 for a thread the store does not hold, saying how to make one and list those there are.
pub(crate) fn not_found(thread: &str) -> ApiError {
    ApiError::not_found(format!(
        "no thread `{thread}`: create it with POST /threads (or start a run with \
         if_not_exists=\"create\"); POST /threads/search lists the threads there are"
    ))
}

/// The assistant whose graph runs the thread, when one is known (a thread made without a graph
/// and never run has none yet).
pub(crate) fn graph_of(assistants: &Assistants, record: &ThreadRecord) -> Option<Arc<Assistant>> {
    assistants.for_graph(record.graph_id()?)
}

/// Whether `metadata` holds every key of `filter` with the same value.
pub(crate) fn matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(k, v)| metadata.get(k) == Some(v))
}
