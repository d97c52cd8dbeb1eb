//! [`SledCheckpointer`]: checkpoints in one sled (0.34) directory.
//!
//! By job: `open.rs` opens a store (the segment size it was created with, a snapshot file sled
//! left unfinished) and says what sled's refusals mean (damaged file, locked, full disk);
//! `checkpointer.rs` is the [`Checkpointer`](stategraph_checkpoint::Checkpointer) contract over sled's trees;
//! `pieces.rs` keeps the pieces of large snapshots, shared by a thread's snapshots, and sweeps
//! those no record names; `keys.rs` is how keys are laid out; `inspect.rs` is what the per-thread
//! layout and tests read beyond the contract (checkpoint ids from keys alone, whether a store is
//! empty, the stored bytes) and the tampering hooks of the corruption tests; `mark.rs` removes
//! the per-thread layout's mark of a store never written once a flush made a record durable;
//! `witness.rs` writes the per-thread layout's flush witness after each flush; `closing.rs`
//! remembers the stores this process just closed, whose lock sled may hold a moment longer.

mod checkpointer;
mod closing;
mod inspect;
mod keys;
mod mark;
mod open;
mod pieces;
mod witness;

pub(crate) use mark::remove_mark;
pub(crate) use open::rebuild_conf;
pub(crate) use witness::{read_flushed, Flushed};

use crate::io_failure::IoFailure;
use stategraph_checkpoint::chunks::{self, ChunkHash};
use stategraph_checkpoint::group_commit::GroupCommit;
use stategraph_checkpoint::CheckpointError;
use std::collections::{HashMap, HashSet};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Checkpoints in one sled (0.34) directory.
///
/// Layout (all keys start with the thread id and a 0 byte, so one thread is one key range):
/// - `checkpoints`: thread, checkpoint id (16 bytes, time-ordered) -> framed
///   [`CheckpointRecord`](stategraph_checkpoint::CheckpointRecord)
/// - `pieces`: thread, hash (16 bytes) -> one piece of a large snapshot, shared by every
///   snapshot of the thread that holds it (see `checkpoint/chunks.rs`)
/// - `writes`: thread, checkpoint id, sequence (8 bytes) -> framed
///   [`PendingWrite`](stategraph_checkpoint::PendingWrite)
/// - `journal`: thread, journal key -> framed JSON value
/// - `leases`: thread -> framed [`Lease`](stategraph_checkpoint::Lease)
/// - `threads`: thread -> empty (the index `list_threads` reads)
///
/// sled fsyncs on its own only every 500 ms, so a write with `flush = true` calls `flush()`
/// before returning: that is what makes `Durability::Sync` true. Runs writing at the same time
/// share those flushes (group commit): one flush covers every write finished before it started.
///
/// ```no_run
/// use stategraph_sled::SledCheckpointer;
/// let saver = SledCheckpointer::open("./my-store")?;
/// # Ok::<(), stategraph_checkpoint::CheckpointError>(())
/// ```
pub struct SledCheckpointer {
    // sled's handles flush when dropped, and a flush after a failed write can wait forever:
    // they are dropped by hand (see `Drop`), or not at all once the disk failed.
    db: ManuallyDrop<sled::Db>,
    checkpoints: ManuallyDrop<sled::Tree>,
    pieces: ManuallyDrop<sled::Tree>,
    writes: ManuallyDrop<sled::Tree>,
    journal: ManuallyDrop<sled::Tree>,
    leases: ManuallyDrop<sled::Tree>,
    threads: ManuallyDrop<sled::Tree>,
    path: PathBuf,
    known_threads: Mutex<HashSet<String>>,
    /// Per thread, pieces known to be stored: a large snapshot names thousands, nearly all
    /// stored already, and asking sled for each cost a lookup. Only this process writes the
    /// store (sled locks it), and sweeping or deleting a thread forgets its entry. At most
    /// `KNOWN_PIECES_THREADS` threads are remembered; forgetting only costs lookups.
    known_pieces: Mutex<HashMap<String, HashSet<ChunkHash>>>,
    flushes: GroupCommit,
    io: IoFailure,
    unwritten: mark::UnwrittenMark,
    witness: witness::FlushWitness,
}

/// How a sled store is laid out: pass to [`SledCheckpointer::open_with`].
///
/// A store's segment size is fixed when it is created; an existing store is opened with the
/// size it was created with, whatever these options say.
///
/// ```
/// use stategraph_sled::SledOptions;
/// let small = SledOptions::small();
/// assert!(small.cache_capacity < SledOptions::default().cache_capacity);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SledOptions {
    /// Bytes per log segment of a new store: a power of two from 256 bytes to 16 MiB. A store
    /// occupies at least one segment on disk, and sled rewrites a segment once half of it is
    /// garbage, so smaller segments keep a store closer to the size of what it holds. Values
    /// larger than a quarter of a segment go to separate blob files.
    pub segment_size: usize,
    /// Bytes of page cache.
    pub cache_capacity: u64,
}

impl Default for SledOptions {
    /// 64 KiB segments: a 1000-step thread takes about half the disk it took with sled's own
    /// 512 KiB (BENCHMARKS.md), at no measurable cost in write or open time.
    fn default() -> Self {
        SledOptions {
            segment_size: 64 * 1024,
            // The page cache only needs to hold the hot end of each thread.
            cache_capacity: 16 * 1024 * 1024,
        }
    }
}

impl SledOptions {
    /// For one small store per thread: a smaller page cache.
    pub fn small() -> Self {
        SledOptions {
            cache_capacity: 4 * 1024 * 1024,
            ..SledOptions::default()
        }
    }
}

impl SledCheckpointer {
    /// What a snapshot of `state_bytes` of JSON costs any sled store
    /// ([`Checkpointer::snapshot_cost`](stategraph_checkpoint::Checkpointer::snapshot_cost)): large snapshots are kept as pieces that a thread's
    /// snapshots share, so one costs about what changed since the last.
    pub fn shared_snapshot_cost(state_bytes: usize) -> usize {
        chunks::shared_snapshot_cost(state_bytes)
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes everything written so far durable, on this thread, without sharing the flush.
    pub(crate) fn flush_now(&self) -> Result<(), CheckpointError> {
        self.io.check()?;
        let first_record = self.flush_makes_first_record_durable();
        let due = self.witness.due();
        self.db.flush().map_err(|e| self.io.error(e))?;
        if first_record {
            self.written();
        }
        if let Some(due) = due {
            self.witness.flushed(due);
        }
        Ok(())
    }

    /// Bytes the store occupies on disk (as sled reports it).
    pub fn size_on_disk(&self) -> Result<u64, CheckpointError> {
        self.db.size_on_disk().map_err(|e| self.io.error(e))
    }

    async fn sync(&self, flush: bool) -> Result<(), CheckpointError> {
        // Asked before the commit: a flush that starts after this covers the record seen.
        // Also for a write not to be flushed (async and exit durability): sled's own flush,
        // every 500 ms, would put the first record on disk with the store's mark of never
        // having been written still there, and no hook says when. So a store still marked has
        // its first record flushed here, once; after that this is one atomic load.
        let first_record = self.flush_makes_first_record_durable();
        if !flush && !first_record {
            return Ok(());
        }
        // The leader's flush blocks its thread, but one fsync (~100-200 us) is cheaper than a
        // hop to a blocking pool; callers that wait for it only await.
        self.io.check()?;
        self.flushes
            .commit(|| {
                self.io.check()?;
                // Read before the flush starts, written after it finished: the witness names
                // only what this flush made durable (see `witness.rs`).
                let due = self.witness.due();
                self.io.flush(&self.db)?;
                if let Some(due) = due {
                    self.witness.flushed(due);
                }
                Ok(())
            })
            .await?;
        if first_record {
            self.written();
        }
        Ok(())
    }

    fn remember_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        let mut known = self.known_threads.lock().unwrap_or_else(|p| p.into_inner());
        if !known.contains(thread) {
            self.threads
                .insert(thread.as_bytes(), &[] as &[u8])
                .map_err(|e| self.io.error(e))?;
            known.insert(thread.to_string());
        }
        Ok(())
    }
}

impl Drop for SledCheckpointer {
    fn drop(&mut self) {
        if self.io.check().is_err() {
            // sled would flush again in its handles' drop and wait forever for the failed write:
            // the handles (and the store's lock) are left to the end of the process instead.
            tracing::warn!(store = %self.path.display(), "a store whose disk failed is left open until the process ends");
            return;
        }
        // SAFETY: each handle is dropped exactly once, here, and never used after: this is the
        // value's drop.
        unsafe {
            for tree in [
                &mut self.checkpoints,
                &mut self.pieces,
                &mut self.writes,
                &mut self.journal,
                &mut self.leases,
                &mut self.threads,
            ] {
                ManuallyDrop::drop(tree);
            }
            ManuallyDrop::drop(&mut self.db);
        }
        closing::closed(&self.path);
    }
}
