use super::chunks::{self, ChunkHash, ChunkStore};
use super::codec;
use super::error::{corrupt, encode, CheckpointError};
use super::record::{CheckpointId, CheckpointRecord, Lease, PendingWrite};
use super::Checkpointer;
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

/// Keeps checkpoints in memory, encoded exactly as on disk (so the integrity checks are the same),
/// large snapshots included: their pieces are shared as they are on disk, so a long thread's
/// memory grows with what changed, not with its state at every snapshot.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_checkpoint::{Checkpointer, MemoryCheckpointer};
/// let saver: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
/// # let _ = saver;
/// ```
#[derive(Default)]
pub struct MemoryCheckpointer {
    threads: Mutex<BTreeMap<String, ThreadRecords>>,
}

#[derive(Default)]
struct ThreadRecords {
    checkpoints: BTreeMap<CheckpointId, Vec<u8>>,
    pieces: Pieces,
    writes: BTreeMap<CheckpointId, Vec<Vec<u8>>>,
    journal: HashMap<String, Vec<u8>>,
    lease: Option<Lease>,
}

impl MemoryCheckpointer {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ThreadRecords>> {
        // A panic while holding the lock leaves plain data behind, still consistent per call.
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to every stored piece of the thread's large snapshots. For tests of
    /// corruption handling.
    #[doc(hidden)]
    pub fn tamper_pieces(&self, thread: &str, mut f: impl FnMut(&mut Vec<u8>)) {
        if let Some(t) = self.lock().get_mut(thread) {
            t.pieces.0.values_mut().for_each(&mut f);
        }
    }

    /// Bytes the thread's checkpoints, pending writes and pieces hold. For tests of how storage
    /// grows.
    #[doc(hidden)]
    pub fn stored_bytes(&self, thread: &str) -> u64 {
        self.lock().get(thread).map_or(0, |t| {
            let records: usize = t.checkpoints.values().map(|b| 16 + b.len()).sum();
            let writes: usize = t.writes.values().flatten().map(|b| 16 + b.len()).sum();
            let pieces: usize = t.pieces.0.values().map(|b| 16 + b.len()).sum();
            (records + writes + pieces) as u64
        })
    }

    /// Overwrites the stored bytes of a checkpoint. For tests of corruption handling.
    #[doc(hidden)]
    pub fn tamper(&self, thread: &str, id: CheckpointId, f: impl FnOnce(&mut Vec<u8>)) {
        if let Some(bytes) = self
            .lock()
            .get_mut(thread)
            .and_then(|t| t.checkpoints.get_mut(&id))
        {
            f(bytes);
        }
    }
}

/// One thread's snapshot pieces.
#[derive(Default)]
struct Pieces(HashMap<ChunkHash, Vec<u8>>);

impl ChunkStore for Pieces {
    fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError> {
        Ok(self.0.contains_key(hash))
    }

    fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError> {
        self.0.insert(*hash, bytes.to_vec());
        Ok(())
    }

    fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError> {
        Ok(self.0.get(hash).cloned())
    }
}

impl ThreadRecords {
    fn decode(
        &self,
        thread: &str,
        id: CheckpointId,
        bytes: &[u8],
    ) -> Result<CheckpointRecord, CheckpointError> {
        chunks::decode_checkpoint(thread, id, bytes, &self.pieces)
    }
}

#[async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        _flush: bool,
    ) -> Result<(), CheckpointError> {
        let mut threads = self.lock();
        // Looked up before inserting: `entry` wants an owned key, a copy of the thread id per
        // checkpoint.
        if !threads.contains_key(&record.thread_id) {
            threads.insert(record.thread_id.clone(), ThreadRecords::default());
        }
        let t = threads
            .get_mut(&record.thread_id)
            .expect("the thread's records were just inserted");
        let bytes = chunks::encode_checkpoint(record, &mut t.pieces)?;
        t.checkpoints.insert(record.id, bytes);
        Ok(())
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        let threads = self.lock();
        let Some(t) = threads.get(thread) else {
            return Ok(None);
        };
        let found = match id {
            Some(id) => t.checkpoints.get_key_value(&id),
            None => t.checkpoints.iter().next_back(),
        };
        found
            .map(|(id, bytes)| t.decode(thread, *id, bytes))
            .transpose()
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let threads = self.lock();
        let Some(t) = threads.get(thread) else {
            return Ok(Vec::new());
        };
        let upper = match before {
            Some(b) => t.checkpoints.range(..b),
            None => t.checkpoints.range(..),
        };
        upper
            .rev()
            .take(limit)
            .map(|(id, bytes)| t.decode(thread, *id, bytes))
            .collect()
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        _flush: bool,
    ) -> Result<(), CheckpointError> {
        let mut threads = self.lock();
        let t = threads.entry(thread.to_string()).or_default();
        for w in writes {
            // A large result is kept as pieces it shares with the thread's snapshots.
            let bytes = chunks::spill(encode(thread, w)?, None, &mut t.pieces)
                .map_err(|e| e.in_record(thread, Some(checkpoint), "pending writes"))?;
            t.writes.entry(checkpoint).or_default().push(bytes);
        }
        Ok(())
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        let threads = self.lock();
        let Some(list) = threads.get(thread).and_then(|t| t.writes.get(&checkpoint)) else {
            return Ok(Vec::new());
        };
        let pieces = &threads.get(thread).map(|t| &t.pieces);
        list.iter()
            .map(|b| {
                let frame = match pieces {
                    Some(p) => chunks::unspill(b, *p)?,
                    None => std::borrow::Cow::Borrowed(&b[..]),
                };
                codec::decode(&frame)
            })
            .map(|r| r.map_err(|e| corrupt(thread, Some(checkpoint), "pending writes", e)))
            .collect()
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let threads = self.lock();
        threads
            .get(thread)
            .and_then(|t| t.journal.get(key))
            .map(|b| codec::decode(b).map_err(|e| corrupt(thread, None, "journal entry", e)))
            .transpose()
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        let bytes = encode(thread, value)?;
        self.lock()
            .entry(thread.to_string())
            .or_default()
            .journal
            .insert(key.to_string(), bytes);
        Ok(())
    }

    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let mut keys: Vec<String> = self
            .lock()
            .get(thread)
            .map(|t| t.journal.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        Ok(keys)
    }

    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let below = format!("{thread}/");
        Ok(self
            .lock()
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .filter(|(_, t)| !t.checkpoints.is_empty())
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(self
            .lock()
            .iter()
            // A subgraph's namespace (`{root}/{ns}`) is part of its root thread, not a thread.
            .filter(|(k, t)| !t.checkpoints.is_empty() && crate::is_root_thread(k))
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        let below = format!("{thread}/");
        // A thread's subgraph namespaces go with it.
        self.lock()
            .retain(|k, _| k != thread && !k.starts_with(&below));
        Ok(())
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        if let Some(t) = self.lock().get_mut(thread) {
            let mut removed_pieces = false;
            for id in ids {
                let removed = t.checkpoints.remove(id);
                removed_pieces |= removed.is_some_and(|r| chunks::may_hold_pieces(&r));
                let writes = t.writes.remove(id).unwrap_or_default();
                removed_pieces |= writes.iter().any(|w| chunks::may_hold_pieces(w));
                let prefix = format!("{id}/");
                t.journal.retain(|k, _| !k.starts_with(&prefix));
            }
            if removed_pieces {
                let records = t.checkpoints.values().chain(t.writes.values().flatten());
                let live = chunks::live_pieces(thread, records.map(|b| &b[..]), &t.pieces)?;
                t.pieces.0.retain(|h, _| live.contains(h));
            }
        }
        Ok(())
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        Ok(self.lock().get(thread).and_then(|t| t.lease.clone()))
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        let mut threads = self.lock();
        let t = threads.entry(thread.to_string()).or_default();
        if t.lease.as_ref() != expected {
            return Ok(Err(t.lease.clone()));
        }
        t.lease = new.cloned();
        Ok(Ok(()))
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        chunks::shared_snapshot_cost(state_bytes)
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        Ok(())
    }
}
