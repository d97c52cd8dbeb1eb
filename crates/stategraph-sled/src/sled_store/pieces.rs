//! The pieces of large snapshots (see `checkpoint/chunks.rs`): stored once per thread in the
//! `pieces` tree, shared by every snapshot of the thread that holds them, remembered per thread
//! so a snapshot of thousands of pieces does not ask sled for each, and swept once no record
//! names them.

use super::keys::{id_from_key, thread_prefix};
use super::SledCheckpointer;
use crate::io_failure::IoFailure;
use stategraph_checkpoint::backend::corrupt;
use stategraph_checkpoint::chunks::{self, ChunkHash, ChunkStore};
use stategraph_checkpoint::codec;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::CheckpointRecord;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

impl SledCheckpointer {
    pub(super) fn pieces_of<'a>(&'a self, thread: &'a str) -> SledPieces<'a> {
        SledPieces {
            tree: &self.pieces,
            io: &self.io,
            thread,
            known: &self.known_pieces,
        }
    }

    pub(super) fn forget_pieces(&self, thread: &str) {
        self.known_pieces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread);
    }

    /// Removes the thread's pieces that no remaining checkpoint refers to.
    pub(super) fn sweep_pieces(&self, thread: &str) -> Result<(), CheckpointError> {
        self.forget_pieces(thread);
        let prefix = thread_prefix(thread);
        // Pending writes name pieces too: a large one is stored as pieces (`chunks::spill`).
        let records = self
            .checkpoints
            .scan_prefix(&prefix)
            .values()
            .chain(self.writes.scan_prefix(&prefix).values())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.io.error(e))?;
        let live = chunks::live_pieces(
            thread,
            records.iter().map(|r| &r[..]),
            &self.pieces_of(thread),
        )?;
        let mut batch = sled::Batch::default();
        for key in self.pieces.scan_prefix(&prefix).keys() {
            let key = key.map_err(|e| self.io.error(e))?;
            let hash: Option<ChunkHash> = key.get(prefix.len()..).and_then(|h| h.try_into().ok());
            if hash.is_none_or(|h| !live.contains(&h)) {
                batch.remove(key);
            }
        }
        self.pieces.apply_batch(batch).map_err(|e| self.io.error(e))
    }
}

/// Threads whose stored pieces a store remembers at once.
const KNOWN_PIECES_THREADS: usize = 64;

/// One thread's snapshot pieces in the `pieces` tree.
pub(super) struct SledPieces<'a> {
    tree: &'a sled::Tree,
    io: &'a IoFailure,
    thread: &'a str,
    known: &'a Mutex<HashMap<String, HashSet<ChunkHash>>>,
}

impl SledPieces<'_> {
    fn key(&self, hash: &ChunkHash) -> Vec<u8> {
        let mut k = thread_prefix(self.thread);
        k.extend_from_slice(hash);
        k
    }

    pub(super) fn decode(
        &self,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<CheckpointRecord, CheckpointError> {
        let id = id_from_key(self.thread, key).ok_or_else(|| {
            corrupt(
                self.thread,
                None,
                "checkpoint",
                codec::FrameError::Decode(format!(
                    "its key of {} bytes names no checkpoint",
                    key.len()
                )),
            )
        })?;
        chunks::decode_checkpoint(self.thread, id, bytes, self)
    }

    fn remember(&self, hash: &ChunkHash) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        // A server that writes many large threads would otherwise keep every set; the threads
        // being written now refill theirs on their next snapshot.
        if known.len() >= KNOWN_PIECES_THREADS && !known.contains_key(self.thread) {
            known.clear();
        }
        known
            .entry(self.thread.to_string())
            .or_default()
            .insert(*hash);
    }
}

impl ChunkStore for SledPieces<'_> {
    fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(self.thread)
            .is_some_and(|k| k.contains(hash));
        if known {
            return Ok(true);
        }
        let stored = self
            .tree
            .contains_key(self.key(hash))
            .map_err(|e| self.io.error(e))?;
        if stored {
            self.remember(hash);
        }
        Ok(stored)
    }

    fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError> {
        self.tree
            .insert(self.key(hash), bytes)
            .map_err(|e| self.io.error(e))?;
        self.remember(hash);
        Ok(())
    }

    fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError> {
        self.tree
            .get(self.key(hash))
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| self.io.error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pieces_a_store_remembers_are_bounded_and_forgetting_them_only_costs_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledCheckpointer::open(dir.path()).unwrap();
        let piece = [7u8; 16];
        for i in 0..KNOWN_PIECES_THREADS + 6 {
            let thread = format!("t{i}");
            let mut pieces = store.pieces_of(&thread);
            pieces.insert(&piece, b"bytes").unwrap();
        }
        let remembered = store.known_pieces.lock().unwrap().len();
        assert!(
            remembered <= KNOWN_PIECES_THREADS,
            "{remembered} threads remembered"
        );
        // A forgotten thread's pieces are still found, in sled.
        assert!(store.pieces_of("t0").contains(&piece).unwrap());
        assert!(!store.pieces_of("t0").contains(&[8u8; 16]).unwrap());
    }
}
