//! The server's own record of a thread: the metadata a client gave it, the graph it belongs to,
//! when it was made. Kept in the thread's journal (flushed), so it lives and dies with the
//! thread's checkpoints in whatever store holds them; the [`KEEP_RECORDS`] last read or written
//! are cached here (only this server writes them), so a server's memory does not grow with the
//! threads it has ever seen.
//!
//! A thread another program started (`graph run`) has no record: it reads as one made when its
//! newest checkpoint was, with no metadata, belonging to the graph its checkpoints name.

use super::assistants::{Assistant, Assistants};
use super::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use stategraph::checkpoint::{validate_thread_id, Checkpointer};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Thread records kept in memory: those of the threads in use; any other is read again from its
/// thread when asked for.
pub(crate) const KEEP_RECORDS: usize = 256;

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

/// The records of threads in the server's store: the last [`KEEP_RECORDS`] read or written,
/// and which threads made here may have no checkpoint yet.
pub(crate) struct Catalog {
    store: Arc<dyn Checkpointer>,
    records: Mutex<Records>,
}

#[derive(Default)]
struct Records {
    kept: HashMap<String, ThreadRecord>,
    /// Oldest first; when longer than [`KEEP_RECORDS`] the first goes (with its record). A
    /// thread forgotten and kept again may be named twice: the older name then drops its record
    /// early, which only costs a read.
    order: VecDeque<String>,
    /// Threads made with a record and maybe no checkpoint, which a store's listing leaves out;
    /// each goes once a run of it has finished or paused, or a listing names it.
    unlisted: BTreeSet<String>,
}

impl Catalog {
    pub fn new(store: Arc<dyn Checkpointer>) -> Self {
        Catalog {
            store,
            records: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, thread: &str, record: ThreadRecord) {
        let mut records = self.lock();
        if records.kept.insert(thread.to_string(), record).is_none() {
            records.order.push_back(thread.to_string());
        }
        while records.order.len() > KEEP_RECORDS {
            if let Some(oldest) = records.order.pop_front() {
                records.kept.remove(&oldest);
            }
        }
    }

    pub fn forget(&self, thread: &str) {
        let mut records = self.lock();
        records.kept.remove(thread);
        records.unlisted.remove(thread);
    }

    /// Threads made here that may have no checkpoint yet (which a store's listing leaves out).
    pub fn unlisted(&self) -> Vec<String> {
        self.lock().unlisted.iter().cloned().collect()
    }

    /// Notes that these threads have checkpoints (a listing named them, or a run of one finished
    /// or paused).
    pub fn listed<'a>(&self, threads: impl IntoIterator<Item = &'a String>) {
        let mut records = self.lock();
        if records.unlisted.is_empty() {
            return;
        }
        for thread in threads {
            records.unlisted.remove(thread);
        }
    }

    /// The thread's record: as this server keeps it, else one read from its newest checkpoint;
    /// `None` when the thread does not exist.
    pub async fn read(&self, thread: &str) -> Result<Option<ThreadRecord>, ApiError> {
        check_id(thread)?;
        // A kept record that names no graph is read again: another server over the same
        // database may have run the thread since (its first run names the graph).
        if let Some(r) = self.lock().kept.get(thread).cloned() {
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

    /// Saves the record of a thread made with no checkpoint (flushed), and keeps it among the
    /// threads a listing must add (see [`Catalog::unlisted`]).
    pub async fn create(&self, thread: &str, record: &ThreadRecord) -> Result<(), ApiError> {
        self.write(thread, record).await?;
        self.lock().unlisted.insert(thread.to_string());
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph::checkpoint::MemoryCheckpointer;

    fn record(n: usize) -> ThreadRecord {
        let mut metadata = Map::new();
        metadata.insert("n".into(), Value::from(n));
        ThreadRecord::new(1, metadata)
    }

    /// A server that made more threads than it keeps records of still reads each one's record
    /// (from its thread), and still lists those no run has given a checkpoint.
    #[tokio::test]
    async fn records_beyond_those_kept_are_read_again_and_still_listed() {
        let catalog = Catalog::new(Arc::new(MemoryCheckpointer::new()));
        let made = KEEP_RECORDS + 40;
        for n in 0..made {
            catalog.create(&format!("t{n}"), &record(n)).await.unwrap();
        }
        assert!(catalog.lock().kept.len() <= KEEP_RECORDS);
        assert!(!catalog.lock().kept.contains_key("t0"));
        let first = catalog.require("t0").await.unwrap();
        assert_eq!(first.metadata["n"], 0);
        assert_eq!(catalog.unlisted().len(), made);

        catalog.listed([&"t0".to_string(), &"t1".to_string()]);
        catalog.forget("t2");
        let unlisted = catalog.unlisted();
        assert_eq!(unlisted.len(), made - 3);
        assert!(!unlisted
            .iter()
            .any(|t| ["t0", "t1", "t2"].contains(&t.as_str())));
        assert!(catalog.read("never-made").await.unwrap().is_none());
    }
}
