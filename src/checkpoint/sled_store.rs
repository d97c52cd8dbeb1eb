use super::chunks::{self, ChunkHash, ChunkStore};
use super::codec;
use super::error::{corrupt, encode, CheckpointError};
use super::group_commit::GroupCommit;
use super::io_failure::IoFailure;
use super::record::{CheckpointId, CheckpointRecord, Lease, PendingWrite};
use super::Checkpointer;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Checkpoints in one sled (0.34) directory.
///
/// Layout (all keys start with the thread id and a 0 byte, so one thread is one key range):
/// - `checkpoints`: thread, checkpoint id (16 bytes, time-ordered) -> framed [`CheckpointRecord`]
/// - `pieces`: thread, hash (16 bytes) -> one piece of a large snapshot, shared by every
///   snapshot of the thread that holds it (see `checkpoint/chunks.rs`)
/// - `writes`: thread, checkpoint id, sequence (8 bytes) -> framed [`PendingWrite`]
/// - `journal`: thread, journal key -> framed JSON value
/// - `leases`: thread -> framed [`Lease`]
/// - `threads`: thread -> empty (the index `list_threads` reads)
///
/// sled fsyncs on its own only every 500 ms, so a write with `flush = true` calls `flush()`
/// before returning: that is what makes `Durability::Sync` true. Runs writing at the same time
/// share those flushes (group commit): one flush covers every write finished before it started.
///
/// ```no_run
/// use stategraph::checkpoint::SledCheckpointer;
/// let saver = SledCheckpointer::open("./my-store")?;
/// # Ok::<(), stategraph::checkpoint::CheckpointError>(())
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
}

/// How a sled store is laid out: pass to [`SledCheckpointer::open_with`].
///
/// A store's segment size is fixed when it is created; an existing store is opened with the
/// size it was created with, whatever these options say.
///
/// ```
/// use stategraph::checkpoint::SledOptions;
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
    /// Opens (or creates) a store in `path` with [`SledOptions::default`].
    ///
    /// Fails with [`CheckpointError::Locked`] when another process has it open.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with(path, SledOptions::default())
    }

    /// Opens (or creates) a store in `path` laid out as `options` say.
    ///
    /// Fails with [`CheckpointError::Locked`] when another process has it open, and with
    /// [`CheckpointError::Storage`] when the options are out of range or differ from those the
    /// store was created with.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SledOptions,
    ) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        let size = options.segment_size;
        if !size.is_power_of_two() || !(256..=1 << 24).contains(&size) {
            return Err(CheckpointError::Storage(format!(
                "segment size {size} is not a power of two between 256 bytes and 16 MiB"
            )));
        }
        let config = |size: usize| {
            sled::Config::new()
                .path(&path)
                .segment_size(size)
                .cache_capacity(options.cache_capacity)
        };
        let open = || match config(size).open() {
            // An existing store keeps the segment size it was created with; sled names it.
            Err(e) => match created_with_segment_size(&e) {
                Some(stored) if stored != size => config(stored).open(),
                _ => Err(e),
            },
            opened => opened,
        };
        let db = match open() {
            Err(sled::Error::Corruption { .. }) if clear_unfinished_snapshots(&path)? => open(),
            opened => opened,
        }
        .map_err(|e| open_error(&path, e))?;
        let tree = |name: &str| {
            db.open_tree(name)
                .map(ManuallyDrop::new)
                .map_err(CheckpointError::storage)
        };
        Ok(SledCheckpointer {
            checkpoints: tree("checkpoints")?,
            pieces: tree("pieces")?,
            writes: tree("writes")?,
            journal: tree("journal")?,
            leases: tree("leases")?,
            threads: tree("threads")?,
            db: ManuallyDrop::new(db),
            known_threads: Mutex::new(HashSet::new()),
            known_pieces: Mutex::new(HashMap::new()),
            flushes: GroupCommit::new(),
            io: IoFailure::new(&path),
            path,
        })
    }

    /// What a snapshot of `state_bytes` of JSON costs any sled store
    /// ([`Checkpointer::snapshot_cost`]): large snapshots are kept as pieces that a thread's
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
        self.db.flush().map(drop).map_err(|e| self.io.error(e))
    }

    /// The ids of the thread's checkpoints, newest first, read from their keys only (so a
    /// damaged record is still listed).
    pub(crate) fn checkpoint_ids(
        &self,
        thread: &str,
    ) -> Result<Vec<CheckpointId>, CheckpointError> {
        self.checkpoints
            .scan_prefix(thread_prefix(thread))
            .keys()
            .rev()
            .map(|k| {
                let k = k.map_err(|e| self.io.error(e))?;
                id_from_key(thread, &k).ok_or_else(|| {
                    CheckpointError::Storage(format!(
                        "a checkpoint key of thread `{thread}` holds no checkpoint id"
                    ))
                })
            })
            .collect()
    }

    /// True when the store holds no record of any kind.
    pub(crate) fn holds_nothing(&self) -> Result<bool, CheckpointError> {
        for tree in [&self.checkpoints, &self.journal, &self.writes, &self.leases] {
            if tree.first().map_err(|e| self.io.error(e))?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// When the thread's oldest checkpoint was written; `None` when it has none.
    pub(crate) fn first_checkpoint_time(
        &self,
        thread: &str,
    ) -> Result<Option<u64>, CheckpointError> {
        let first = self
            .checkpoints
            .scan_prefix(thread_prefix(thread))
            .next()
            .transpose()
            .map_err(|e| self.io.error(e))?;
        let pieces = self.pieces_of(thread);
        Ok(first
            .map(|(k, v)| pieces.decode(&k, &v))
            .transpose()?
            .map(|r| r.metadata.created_at_ms))
    }

    /// Bytes the store occupies on disk (as sled reports it).
    pub fn size_on_disk(&self) -> Result<u64, CheckpointError> {
        self.db.size_on_disk().map_err(|e| self.io.error(e))
    }

    /// Overwrites the stored bytes of a checkpoint. For tests of corruption handling.
    #[doc(hidden)]
    pub fn tamper(
        &self,
        thread: &str,
        id: CheckpointId,
        f: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        let key = checkpoint_key(thread, id);
        if let Some(v) = self.checkpoints.get(&key).map_err(|e| self.io.error(e))? {
            let mut bytes = v.to_vec();
            f(&mut bytes);
            self.checkpoints
                .insert(key, bytes)
                .map_err(|e| self.io.error(e))?;
        }
        Ok(())
    }

    /// Applies `f` to every stored piece of the thread's large snapshots. For tests of
    /// corruption handling.
    #[doc(hidden)]
    pub fn tamper_pieces(
        &self,
        thread: &str,
        mut f: impl FnMut(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        for item in self.pieces.scan_prefix(thread_prefix(thread)) {
            let (key, value) = item.map_err(|e| self.io.error(e))?;
            let mut bytes = value.to_vec();
            f(&mut bytes);
            self.pieces
                .insert(key, bytes)
                .map_err(|e| self.io.error(e))?;
        }
        Ok(())
    }

    /// Bytes of keys and values the thread's checkpoints, pending writes and pieces hold
    /// (before sled's own overhead). For tests of how storage grows.
    #[doc(hidden)]
    pub fn stored_bytes(&self, thread: &str) -> Result<u64, CheckpointError> {
        let prefix = thread_prefix(thread);
        let mut total = 0u64;
        for tree in [&self.checkpoints, &self.writes, &self.pieces] {
            for item in tree.scan_prefix(&prefix) {
                let (k, v) = item.map_err(|e| self.io.error(e))?;
                total += (k.len() + v.len()) as u64;
            }
        }
        Ok(total)
    }

    fn pieces_of<'a>(&'a self, thread: &'a str) -> SledPieces<'a> {
        SledPieces {
            tree: &self.pieces,
            io: &self.io,
            thread,
            known: &self.known_pieces,
        }
    }

    fn forget_pieces(&self, thread: &str) {
        self.known_pieces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread);
    }

    /// Removes the thread's pieces that no remaining checkpoint refers to.
    fn sweep_pieces(&self, thread: &str) -> Result<(), CheckpointError> {
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

    async fn sync(&self, flush: bool) -> Result<(), CheckpointError> {
        if !flush {
            return Ok(());
        }
        // The leader's flush blocks its thread, but one fsync (~100-200 us) is cheaper than a
        // hop to a blocking pool; callers that wait for it only await.
        self.io.check()?;
        self.flushes
            .commit(|| {
                self.io.check()?;
                self.db.flush().map(drop).map_err(|e| self.io.error(e))
            })
            .await
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
    }
}

/// Moves aside the snapshot files sled was still writing when its process died, and says
/// whether there were any.
///
/// sled 0.34 writes its own snapshot (a cache of where its pages are) to
/// `snap.<lsn>.generating` and renames it when complete, but when it opens a store it reads the
/// newest `snap.*` file, unfinished ones included. A process killed while writing one (sled
/// writes one on every open) leaves a store that sled then refuses as corrupt, with everything
/// in it intact: the crash test hit this 3 times in ~200 runs. This is called only after
/// sled refused the store as corrupt, and sled reads its snapshot while holding the store's
/// lock, so no live process is writing the file. Without the file, sled recovers from its
/// previous snapshot and the log.
fn clear_unfinished_snapshots(path: &Path) -> Result<bool, CheckpointError> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(_) => return Ok(false),
    };
    let mut cleared = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            // Renamed, not deleted, so what sled left stays there to look at; and out of the
            // `snap.` names that sled reads.
            std::fs::rename(entry.path(), path.join(format!("unfinished-{name}"))).map_err(
                |e| {
                    CheckpointError::Storage(format!(
                        "cannot move aside the unfinished sled snapshot {}: {e}",
                        entry.path().display()
                    ))
                },
            )?;
            tracing::warn!(store = %path.display(), file = %name, "moved aside a sled snapshot its writer did not finish");
            cleared = true;
        }
    }
    Ok(cleared)
}

/// The segment size an existing store was created with, when opening it with another failed.
fn created_with_segment_size(e: &sled::Error) -> Option<usize> {
    match e {
        sled::Error::Unsupported(message) if message.contains("io buffer size") => message
            .rsplit(' ')
            .next()
            .and_then(|n| n.trim().parse().ok()),
        _ => None,
    }
}

fn open_error(path: &Path, e: sled::Error) -> CheckpointError {
    if let sled::Error::Corruption { at, .. } = &e {
        let file = damaged_file(path, at.as_ref());
        let reason = match at {
            Some(sled::DiskPtr::Inline(offset)) => {
                format!("sled finds corrupt data in it at offset {offset}")
            }
            _ => "sled finds it corrupt and cannot open the store".to_string(),
        };
        return CheckpointError::Damaged {
            thread: String::new(),
            file,
            reason,
        };
    }
    if let sled::Error::Io(io) = &e {
        if let CheckpointError::DiskFull { path } = super::io_failure::io_error(path, io) {
            return CheckpointError::DiskFull { path };
        }
    }
    let text = e.to_string();
    let locked = match &e {
        sled::Error::Io(io) => io.kind() == std::io::ErrorKind::WouldBlock || text.contains("lock"),
        _ => false,
    };
    if locked {
        CheckpointError::Locked {
            path: path.display().to_string(),
        }
    } else {
        CheckpointError::Storage(format!("cannot open store at {}: {text}", path.display()))
    }
}

/// The file (relative to the store) sled found damaged: the log (`db`), a blob, or when sled does
/// not say, its configuration if that fails its checksum, else its newest snapshot file (which
/// it reads first) if there is one.
fn damaged_file(path: &Path, at: Option<&sled::DiskPtr>) -> String {
    match at {
        Some(sled::DiskPtr::Blob(_, blob)) => format!("blobs/{blob}"),
        Some(sled::DiskPtr::Inline(_)) => "db".to_string(),
        None if conf_is_damaged(&path.join("conf")) => "conf".to_string(),
        None => std::fs::read_dir(path)
            .ok()
            .and_then(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
                    .max()
            })
            .unwrap_or_else(|| "db".to_string()),
    }
}

/// Whether sled's configuration file fails its checksum (a CRC32 of the text, little-endian, in
/// its last four bytes).
fn conf_is_damaged(conf: &Path) -> bool {
    let Ok(bytes) = std::fs::read(conf) else {
        return false;
    };
    let Some(split) = bytes.len().checked_sub(4).filter(|&n| n > 4) else {
        return true;
    };
    let (text, crc) = bytes.split_at(split);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    crc32fast::hash(text) != stored
}

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

fn thread_prefix(thread: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(thread.len() + 1 + 16 + 8);
    k.extend_from_slice(thread.as_bytes());
    k.push(0);
    k
}

fn checkpoint_key(thread: &str, id: CheckpointId) -> Vec<u8> {
    let mut k = thread_prefix(thread);
    k.extend_from_slice(id.as_bytes());
    k
}

fn id_from_key(thread: &str, key: &[u8]) -> Option<CheckpointId> {
    let start = thread.len() + 1;
    let bytes: [u8; 16] = key.get(start..start + 16)?.try_into().ok()?;
    Some(CheckpointId::from_bytes(bytes))
}

/// Threads whose stored pieces a store remembers at once.
const KNOWN_PIECES_THREADS: usize = 64;

/// One thread's snapshot pieces in the `pieces` tree.
struct SledPieces<'a> {
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

    fn decode(&self, key: &[u8], bytes: &[u8]) -> Result<CheckpointRecord, CheckpointError> {
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

fn remove_prefix(tree: &sled::Tree, prefix: &[u8], io: &IoFailure) -> Result<(), CheckpointError> {
    let mut batch = sled::Batch::default();
    for item in tree.scan_prefix(prefix).keys() {
        batch.remove(item.map_err(|e| io.error(e))?);
    }
    tree.apply_batch(batch).map_err(|e| io.error(e))
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

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        let mut out = Vec::new();
        for k in self.threads.iter().keys() {
            let k = k.map_err(|e| self.io.error(e))?;
            let thread = String::from_utf8_lossy(&k).into_owned();
            // A subgraph's namespace (`{root}/{ns}`) is part of its root thread, not a thread.
            if !thread.contains('/') {
                out.push(thread);
            }
        }
        Ok(out)
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
    use crate::checkpoint::{CheckpointMetadata, Frontier, Source, StateData};

    fn record(thread: &str) -> CheckpointRecord {
        CheckpointRecord {
            thread_id: thread.to_string(),
            id: crate::checkpoint::CheckpointId::from_u128(7),
            parent_id: None,
            step: 0,
            state: StateData::Snapshot(serde_json::value::to_raw_value(&[1, 2]).unwrap()),
            frontier: Frontier::default(),
            metadata: CheckpointMetadata {
                source: Source::Input,
                writers: vec![],
                created_at_ms: 1,
                schema_version: 0,
                run_id: "r".into(),
                graph: None,
            },
        }
    }

    #[tokio::test]
    async fn a_store_keeps_the_segment_size_it_was_created_with() {
        let dir = tempfile::tempdir().unwrap();
        let old = SledOptions {
            segment_size: 512 * 1024,
            ..SledOptions::default()
        };
        let store = SledCheckpointer::open_with(dir.path(), old).unwrap();
        store.put_checkpoint(&record("t"), true).await.unwrap();
        drop(store);

        let reopened = SledCheckpointer::open(dir.path()).unwrap();
        let read = reopened.get_checkpoint("t", None).await.unwrap().unwrap();
        assert_eq!(read.id, record("t").id);
        let conf =
            String::from_utf8_lossy(&std::fs::read(dir.path().join("conf")).unwrap()).to_string();
        assert!(conf.contains("segment_size: 524288"), "{conf}");
    }

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

    #[tokio::test]
    async fn a_store_whose_process_died_while_sled_wrote_its_snapshot_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledCheckpointer::open(dir.path()).unwrap();
        store.put_checkpoint(&record("t"), true).await.unwrap();
        drop(store);
        // What a kill in the middle of sled's snapshot leaves: a newer, unfinished file.
        std::fs::write(
            dir.path().join("snap.7FFFFFFFFFFFFFFF.generating"),
            b"half a snapshot, no checksum",
        )
        .unwrap();
        let plain = sled::Config::new()
            .path(dir.path())
            .segment_size(SledOptions::default().segment_size)
            .open();
        assert!(
            matches!(plain, Err(sled::Error::Corruption { .. })),
            "sled alone refuses the store: {plain:?}"
        );
        drop(plain);

        let store = SledCheckpointer::open(dir.path()).unwrap();
        let read = store.get_checkpoint("t", None).await.unwrap().unwrap();
        assert_eq!(read.id, record("t").id);
        assert!(dir
            .path()
            .join("unfinished-snap.7FFFFFFFFFFFFFFF.generating")
            .exists());
    }

    #[test]
    fn only_a_segment_size_mismatch_names_a_size() {
        let mismatch = sled::Error::Unsupported(
            "cannot change the io buffer size across restarts. please change it back to 524288"
                .into(),
        );
        assert_eq!(created_with_segment_size(&mismatch), Some(524288));
        let other = sled::Error::Unsupported("cannot change compression values".into());
        assert_eq!(created_with_segment_size(&other), None);
    }
}
