//! Reading a store without writing it: open a private copy.
//!
//! sled 0.34 has no read-only mode: opening a store recovers its log, writes a new snapshot of
//! its page table, zeroes torn segments and removes blob files past the recovered end. A read
//! must never change a store (a damaged one least of all: recovery would make the damage
//! permanent), so readers copy the store's files while holding a shared lock on `store/db`
//! (which keeps writers from opening it mid-copy), let go, and open the copy. Its blob files,
//! which sled never writes after making them, are hard-linked rather than copied where the
//! temporary directory is on the store's file system (`layout::copy_linking_blobs`).
//! The copy is made by `temp_copy.rs`, which reading and the blob checks share. It serves the
//! thread's next reads while the store's fingerprint (its files' names, sizes and times) is the
//! one taken with it; a store written since (by another process) is copied again, and the old
//! copy removed once its last read ends.

use super::blobs::check_blobs;
use super::damage::Damage;
use super::layout::flushed_beside;
use super::layout::{fingerprint, io_error, FileLock};
use super::temp_copy::link_to_temp;
use crate::sled_store::{read_flushed, rebuild_conf, Flushed};
use crate::{SledCheckpointer, SledOptions};
use stategraph_checkpoint::CheckpointError;
use std::path::Path;

/// A private, opened copy of a thread's store.
pub(super) struct ReadCopy {
    // Declared first: the store closes before its directory is removed.
    pub store: SledCheckpointer,
    _dir: tempfile::TempDir,
    /// What was wrong with the store, when the copy could be read only after setting a damaged
    /// file aside, or reads only what was written before a damaged blob file.
    pub damage: Option<Damage>,
    /// True when `damage` is a blob file that fails its checksum: the copy ends before it, so
    /// what a reader finds missing was lost with it.
    pub blob_damaged: bool,
    /// The threads whose every record was written after a damaged blob file: the copy does not
    /// hold them at all (see `blobs.rs`).
    pub lost_threads: Vec<String>,
    /// The store's [`fingerprint`] when it was copied (under the lock that keeps writers out):
    /// while the store's is the same, the copy holds what the store does.
    pub fingerprint: Option<String>,
    /// The thread's flush witness (`sled_store/witness.rs`) as it was when the store was copied:
    /// read under the same lock, since only a writer with the store open writes it, so it never
    /// names a checkpoint a writer added after the copy.
    pub flushed: Option<Flushed>,
    /// The process that held the store when it was copied without the lock, because it
    /// answered no reads (stopped with Ctrl+Z, or serving nobody): the copy holds what that
    /// process had flushed, and may be behind what it has done since (see `held_copy.rs`).
    pub held_by: Option<u32>,
}

impl ReadCopy {
    /// True when the store in `store_dir` is as it was copied: a writer (another process) has
    /// not opened it since.
    pub fn is_current(&self, store_dir: &Path) -> bool {
        self.fingerprint.is_some() && fingerprint(store_dir) == self.fingerprint
    }

    /// The store to read `thread` from; [`CheckpointError::Damaged`] when the copy lost the
    /// thread whole (read as missing, it would look like a thread that never was).
    pub fn reads(&self, thread: &str) -> Result<&SledCheckpointer, CheckpointError> {
        let root = stategraph_checkpoint::root_thread(thread);
        match &self.damage {
            Some(d) if self.lost_threads.iter().any(|t| t == root) => {
                Err(CheckpointError::Damaged {
                    thread: root.to_string(),
                    file: d.file.clone(),
                    reason: format!(
                        "{}; every checkpoint of this thread was in it or written after it",
                        d.reason
                    ),
                })
            }
            _ => Ok(&self.store),
        }
    }
}

/// What trying to copy a store found.
pub(super) enum Copied {
    Open(Box<ReadCopy>),
    /// A writer has the store open (or is opening it).
    Busy,
    /// No store there.
    Missing,
}

/// Copies the store in `store_dir` and opens the copy. `thread` names it in errors; `blobs` are
/// the blob files the store had when it was last closed (from its index; empty when it does not
/// say), checked before the copy is opened (see `blobs.rs`).
pub(super) fn open_copy(
    store_dir: &Path,
    thread: &str,
    options: SledOptions,
    blobs: &[String],
) -> Result<Copied, CheckpointError> {
    let db_file = store_dir.join("db");
    let file = match std::fs::File::open(&db_file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Copied::Missing),
        Err(e) => return Err(io_error("cannot read", &db_file, e)),
    };
    let Some(lock) =
        FileLock::try_take(file, false).map_err(|e| io_error("cannot lock", &db_file, e))?
    else {
        return Ok(Copied::Busy);
    };
    let dir = link_to_temp(store_dir)?;
    let print = fingerprint(store_dir);
    let flushed = flushed_beside(store_dir).and_then(|f| read_flushed(&f, thread));
    drop(lock);
    let copied = Unopened {
        dir,
        fingerprint: print,
        flushed,
        held_by: None,
    };
    open_copied(copied, store_dir, thread, options, blobs).map(|c| Copied::Open(Box::new(c)))
}

/// A store's files copied into a temporary directory, not opened yet.
pub(super) struct Unopened {
    pub dir: tempfile::TempDir,
    pub fingerprint: Option<String>,
    pub flushed: Option<Flushed>,
    pub held_by: Option<u32>,
}

/// Opens a copy made by [`open_copy`] or `held_copy.rs`: its blob files checked first, a damaged
/// file of sled's bookkeeping set aside.
pub(super) fn open_copied(
    copied: Unopened,
    store_dir: &Path,
    thread: &str,
    options: SledOptions,
    blobs: &[String],
) -> Result<ReadCopy, CheckpointError> {
    let Unopened {
        dir,
        fingerprint: print,
        flushed,
        held_by,
    } = copied;
    let copy = dir.path().join("store");
    // Before opening: sled's recovery reads the log only up to a blob that fails its checksum,
    // and removes the blob with everything written after it.
    let blob_check = check_blobs(&copy, store_dir, blobs, options);
    let (store, set_aside) = open_setting_aside(&copy, dir.path(), store_dir, thread, options)?;
    let lost_threads = match blob_check.damage {
        Some(_) => lost_threads(&store, blob_check.threads)?,
        None => Vec::new(),
    };
    let blob_damaged = blob_check.damage.is_some();
    Ok(ReadCopy {
        store,
        _dir: dir,
        damage: blob_check.damage.or(set_aside),
        blob_damaged,
        lost_threads,
        fingerprint: print,
        flushed,
        held_by,
    })
}

/// Opens the copy at `copy`, setting a damaged file of sled's own bookkeeping aside (into
/// `aside`) once; with the store comes what was set aside. `store_dir` and `thread` name the
/// original in errors.
fn open_setting_aside(
    copy: &Path,
    aside: &Path,
    store_dir: &Path,
    thread: &str,
    options: SledOptions,
) -> Result<(SledCheckpointer, Option<Damage>), CheckpointError> {
    let mut damage: Option<Damage> = None;
    loop {
        match SledCheckpointer::open_with(copy, options) {
            Ok(store) => return Ok((store, damage)),
            Err(CheckpointError::Damaged { file, reason, .. }) => {
                let original = store_dir.join(&file).display().to_string();
                // A damaged file of sled's own bookkeeping (its page table's snapshot, its
                // configuration) is set aside in the copy: sled rebuilds the one from the log,
                // the other's content is known (`rebuild_conf`), and our records carry their
                // own checksums, so what reads back is sound. Damage to the log itself is final.
                let set_aside = damage.is_none()
                    && match file.as_str() {
                        "conf" => rebuild_conf(copy, &aside.join(&file), options).is_ok(),
                        f if f.starts_with("snap.") => {
                            std::fs::rename(copy.join(f), aside.join(f)).is_ok()
                        }
                        _ => false,
                    };
                if !set_aside {
                    return Err(CheckpointError::Damaged {
                        thread: thread.to_string(),
                        file: original,
                        reason,
                    });
                }
                damage = Some(Damage {
                    file: original,
                    reason,
                    lost_checkpoints: false,
                });
            }
            // sled's other refusals name the path it was given: the copy's, which is gone by
            // the time anyone reads the message.
            Err(CheckpointError::Storage(message)) => {
                let copy = copy.display().to_string();
                let original = store_dir.display().to_string();
                return Err(CheckpointError::Storage(message.replace(&copy, &original)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The threads the copy of a store with a damaged blob file lost whole: named in the whole log
/// (`in_log`) or in the copy (a thread's name is recorded before its first checkpoint), with no
/// checkpoint in the copy.
fn lost_threads(
    store: &SledCheckpointer,
    in_log: Vec<String>,
) -> Result<Vec<String>, CheckpointError> {
    let mut named = store.root_threads()?;
    named.extend(in_log);
    named.sort();
    named.dedup();
    let mut lost = Vec::new();
    for thread in named {
        if store.checkpoint_ids(&thread)?.is_empty() {
            lost.push(thread);
        }
    }
    Ok(lost)
}
