//! The [`Checkpointer`] contract over sled's trees (see [`SledCheckpointer`] for the layout).

use super::keys::{checkpoint_key, remove_prefix, thread_prefix};
use super::SledCheckpointer;
use async_trait::async_trait;
use stategraph_checkpoint::backend::{corrupt, encode};
use stategraph_checkpoint::chunks;
use stategraph_checkpoint::codec;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::Checkpointer;
use stategraph_checkpoint::{CheckpointId, CheckpointRecord, Lease, PendingWrite};

impl SledCheckpointer {
    /// Removes one thread's (or namespace's) records; the caller syncs.
    fn delete_one(&self, thread: &str) -> Result<(), CheckpointError> {
        let prefix = thread_prefix(thread);
        remove_prefix(&self.checkpoints, &prefix, &self.io)?;
        self.forget_pieces(thread);
        remove_prefix(&self.pieces, &prefix, &self.io)?;
        remove_prefix(&self.writes, &prefix, &self.io)?;
        remove_prefix(&self.journal, &prefix, &self.io)?;
        self.leases
            .remove(thread.as_bytes())
            .map_err(|e| self.io.error(e))?;
        self.threads
            .remove(thread.as_bytes())
            .map_err(|e| self.io.error(e))?;
        self.known_threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread);
        Ok(())
    }
}

#[async_trait]
impl Checkpointer for SledCheckpointer {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.io.check()?;
        let thread = &record.thread_id;
        self.remember_thread(thread)?;
        // Pieces go in before the record that names them, so a record that survives a crash
        // finds its pieces (sled recovers a prefix of its log).
        let bytes = chunks::encode_checkpoint(record, &mut self.pieces_of(thread))?;
        self.checkpoints
            .insert(checkpoint_key(thread, record.id), bytes)
            .map_err(|e| self.io.error(e))?;
        self.witness.saw(thread, record.id, record.step);
        self.sync(flush).await
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        let found = match id {
            Some(id) => {
                let key = checkpoint_key(thread, id);
                self.checkpoints
                    .get(&key)
                    .map_err(|e| self.io.error(e))?
                    .map(|v| (sled::IVec::from(key), v))
            }
            None => self
                .checkpoints
                .scan_prefix(thread_prefix(thread))
                .next_back()
                .transpose()
                .map_err(|e| self.io.error(e))?,
        };
        let pieces = self.pieces_of(thread);
        found.map(|(k, v)| pieces.decode(&k, &v)).transpose()
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let prefix = thread_prefix(thread);
        let range = match before {
            Some(b) => self
                .checkpoints
                .range(prefix.clone()..checkpoint_key(thread, b)),
            None => {
                let mut end = prefix.clone();
                // The byte after the separator: everything of this thread sorts below it.
                if let Some(last) = end.last_mut() {
                    *last = 1;
                }
                self.checkpoints.range(prefix.clone()..end)
            }
        };
        let pieces = self.pieces_of(thread);
        range
            .rev()
            .take(limit)
            .map(|item| {
                let (k, v) = item.map_err(|e| self.io.error(e))?;
                pieces.decode(&k, &v)
            })
            .collect()
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.io.check()?;
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(writes.len());
        let mut pieces = self.pieces_of(thread);
        for w in writes {
            let mut key = checkpoint_key(thread, checkpoint);
            let seq = self.db.generate_id().map_err(|e| self.io.error(e))?;
            key.extend_from_slice(&seq.to_be_bytes());
            // A large result goes in as pieces, before the record that names them.
            let value = chunks::spill(encode(thread, w)?, None, &mut pieces)
                .map_err(|e| e.in_record(thread, Some(checkpoint), "pending writes"))?;
            entries.push((key, value));
        }
        // sled's `apply_batch` seals and writes its log buffer before and after the batch, and
        // every buffer write is synced to disk: two syncs (~400 us) even when nothing asked for
        // one. A single write is atomic on its own, so it takes the plain insert; the flush below
        // (when asked for) is what makes it durable either way.
        match <[_; 1]>::try_from(entries) {
            Ok([(key, value)]) => {
                self.writes
                    .insert(key, value)
                    .map_err(|e| self.io.error(e))?;
            }
            Err(entries) => {
                let mut batch = sled::Batch::default();
                for (key, value) in entries {
                    batch.insert(key, value);
                }
                self.writes
                    .apply_batch(batch)
                    .map_err(|e| self.io.error(e))?;
            }
        }
        self.sync(flush).await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.writes
            .scan_prefix(checkpoint_key(thread, checkpoint))
            .values()
            .map(|v| {
                let v = v.map_err(|e| self.io.error(e))?;
                chunks::unspill(&v, &self.pieces_of(thread))
                    .and_then(|frame| codec::decode(&frame))
                    .map_err(|e| corrupt(thread, Some(checkpoint), "pending writes", e))
            })
            .collect()
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let mut k = thread_prefix(thread);
        k.extend_from_slice(key.as_bytes());
        self.journal
            .get(k)
            .map_err(|e| self.io.error(e))?
            .map(|v| codec::decode(&v).map_err(|e| corrupt(thread, None, "journal entry", e)))
            .transpose()
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.io.check()?;
        let mut k = thread_prefix(thread);
        k.extend_from_slice(key.as_bytes());
        self.journal
            .insert(k, encode(thread, value)?)
            .map_err(|e| self.io.error(e))?;
        self.sync(true).await
    }

    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let prefix = thread_prefix(thread);
        // The prefix ends in a 0 byte, which no thread id holds: a namespace's keys
        // (`{thread}/{ns}\0...`) are not under it.
        self.journal
            .scan_prefix(&prefix)
            .keys()
            .map(|k| {
                let k = k.map_err(|e| self.io.error(e))?;
                String::from_utf8(k[prefix.len()..].to_vec()).map_err(|e| {
                    corrupt(
                        thread,
                        None,
                        "journal entry",
                        codec::FrameError::Decode(format!("its key is not UTF-8: {e}")),
                    )
                })
            })
            .collect()
    }

    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let mut out = Vec::new();
        for k in self
            .threads
            .scan_prefix(format!("{thread}/").as_bytes())
            .keys()
        {
            let k = k.map_err(|e| self.io.error(e))?;
            let namespace = String::from_utf8_lossy(&k).into_owned();
            // Remembered once written; listed while a checkpoint is there.
            let held = self
                .checkpoints
                .scan_prefix(thread_prefix(&namespace))
                .next();
            if held.transpose().map_err(|e| self.io.error(e))?.is_some() {
                out.push(namespace);
            }
        }
        Ok(out)
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.root_threads()
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.io.check()?;
        // A thread's subgraph namespaces go with it.
        let mut below = Vec::new();
        for k in self
            .threads
            .scan_prefix(format!("{thread}/").as_bytes())
            .keys()
        {
            let k = k.map_err(|e| self.io.error(e))?;
            below.push(String::from_utf8_lossy(&k).into_owned());
        }
        for child in below.iter().map(String::as_str).chain([thread]) {
            self.delete_one(child)?;
        }
        self.sync(true).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.io.check()?;
        self.witness_before_delete(thread, ids).await?;
        let mut removed_pieces = false;
        for id in ids {
            let key = checkpoint_key(thread, *id);
            let removed = self
                .checkpoints
                .remove(&key)
                .map_err(|e| self.io.error(e))?;
            removed_pieces |= removed.is_some_and(|r| chunks::may_hold_pieces(&r));
            for write in self.writes.scan_prefix(&key).values() {
                let write = write.map_err(|e| self.io.error(e))?;
                removed_pieces |= chunks::may_hold_pieces(&write);
            }
            remove_prefix(&self.writes, &key, &self.io)?;
            let mut journal_prefix = thread_prefix(thread);
            journal_prefix.extend_from_slice(format!("{id}/").as_bytes());
            remove_prefix(&self.journal, &journal_prefix, &self.io)?;
        }
        if removed_pieces {
            self.sweep_pieces(thread)?;
        }
        self.sync(true).await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        self.leases
            .get(thread.as_bytes())
            .map_err(|e| self.io.error(e))?
            .map(|v| codec::decode(&v).map_err(|e| corrupt(thread, None, "lease", e)))
            .transpose()
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        // Swap on the bytes `expected` encodes to, without reading first: one tree operation
        // where a read and a swap took two. A lease equal to `expected` but stored as other
        // bytes (an older encoding) is swapped on its exact bytes, so a concurrent change
        // between the two attempts still makes the swap fail instead of overwriting it.
        let new_bytes = new.map(|l| encode(thread, l)).transpose()?;
        let mut old_bytes = expected.map(|l| encode(thread, l)).transpose()?;
        for _ in 0..2 {
            // Not flushed: a lease lost to a crash is simply absent, which is safe.
            let current = match self
                .leases
                .compare_and_swap(thread.as_bytes(), old_bytes.as_deref(), new_bytes.clone())
                .map_err(|e| self.io.error(e))?
            {
                Ok(()) => return Ok(Ok(())),
                Err(e) => e.current,
            };
            let found: Option<Lease> = current
                .as_ref()
                .map(|v| codec::decode(v).map_err(|e| corrupt(thread, None, "lease", e)))
                .transpose()?;
            if found.as_ref() != expected {
                return Ok(Err(found));
            }
            old_bytes = current.map(|v| v.to_vec());
        }
        Ok(Err(self.get_lease(thread).await?))
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        Self::shared_snapshot_cost(state_bytes)
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.sync(true).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_stored_in_another_encoding_still_swaps_and_a_changed_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledCheckpointer::open(dir.path()).unwrap();
        let lease = Lease {
            owner: "a".into(),
            pid: 1,
            host: "h".into(),
            expires_at_ms: 5,
        };
        // The same lease with its fields in another order: other bytes, equal value.
        let reordered =
            serde_json::json!({"expires_at_ms": 5, "host": "h", "pid": 1, "owner": "a"});
        let bytes = codec::encode(&reordered).unwrap();
        assert_ne!(bytes, codec::encode(&lease).unwrap());
        store.leases.insert("t", bytes).unwrap();

        let renewed = Lease {
            expires_at_ms: 9,
            ..lease.clone()
        };
        let stale = Lease {
            owner: "b".into(),
            ..lease.clone()
        };
        assert_eq!(
            store.swap_lease("t", Some(&stale), None).await.unwrap(),
            Err(Some(lease.clone()))
        );
        assert_eq!(
            store
                .swap_lease("t", Some(&lease), Some(&renewed))
                .await
                .unwrap(),
            Ok(())
        );
        assert_eq!(store.get_lease("t").await.unwrap(), Some(renewed.clone()));
        assert_eq!(
            store.swap_lease("t", None, Some(&lease)).await.unwrap(),
            Err(Some(renewed))
        );
    }
}
