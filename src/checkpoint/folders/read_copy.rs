//! Reading a store without writing it: open a private copy.
//!
//! sled 0.34 has no read-only mode: opening a store recovers its log, writes a new snapshot of
//! its page table, zeroes torn segments and removes blob files past the recovered end. A read
//! must never change a store (a damaged one least of all: recovery would make the damage
//! permanent), so readers copy the store's files while holding a shared lock on `store/db`
//! (which keeps writers from opening it mid-copy), let go, and open the copy.
//!
//! The copy goes to the temporary directory, or to `/dev/shm` when that fails (a full disk):
//! reading must work when the disk is full.

use super::super::error::CheckpointError;
use super::super::{SledCheckpointer, SledOptions};
use super::index::Damage;
use super::layout::{copy_tree, io_error, FileLock};
use std::path::{Path, PathBuf};

/// A private, opened copy of a thread's store.
pub(super) struct ReadCopy {
    // Declared first: the store closes before its directory is removed.
    pub store: SledCheckpointer,
    _dir: tempfile::TempDir,
    /// What was wrong with the store, when the copy could be read only after setting a damaged
    /// file aside.
    pub damage: Option<Damage>,
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
/// the blob files the store had when it was last closed (from its index), checked before the
/// copy is opened (see [`damaged_blob`]).
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
    let dir = copy_to_temp(store_dir)?;
    drop(lock);
    let copy = dir.path().join("store");
    // Before opening: sled's recovery reads the log only up to a blob that fails its checksum,
    // and removes the blob with everything written after it.
    let blob_damage = damaged_blob(&copy, store_dir, blobs);
    let mut damage: Option<Damage> = None;
    loop {
        match SledCheckpointer::open_with(&copy, options) {
            Ok(store) => {
                let damage = damage.or(blob_damage);
                return Ok(Copied::Open(Box::new(ReadCopy {
                    store,
                    _dir: dir,
                    damage,
                })));
            }
            Err(CheckpointError::Damaged { file, reason, .. }) => {
                let original = store_dir.join(&file).display().to_string();
                // A damaged file of sled's own bookkeeping (its page table's snapshot, its
                // configuration) is set aside in the copy: sled rebuilds the one from the log
                // and writes the other afresh, and our records carry their own checksums, so
                // what reads back is sound. Damage to the log itself is final.
                let aside = (file.starts_with("snap.") || file == "conf")
                    && damage.is_none()
                    && std::fs::rename(copy.join(&file), dir.path().join(&file)).is_ok();
                if !aside {
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
            Err(e) => return Err(e),
        }
    }
}

/// The first of `blobs` (blob files the store had when it was last closed) that fails its
/// checksum in the copy `copy`, named as the file of `store_dir` it was copied from.
///
/// sled keeps a value larger than a quarter of a segment (a large checkpoint, pending writes, a
/// recorded call of the journal) in a file of its own under `blobs/`: a CRC-32 of the rest (4
/// bytes, little-endian), a kind byte, then the value (sled 0.34, `pagecache/blob_io.rs`). On
/// opening, sled reads the log only up to a blob that fails that check, as if the log ended
/// there, and removes the blob: the store would roll back in silence. Only blobs that were there
/// when the store was closed are checked: one a kill cut short while it was written was never
/// part of the store, and is rightly dropped.
pub(super) fn damaged_blob(copy: &Path, store_dir: &Path, blobs: &[String]) -> Option<Damage> {
    blobs.iter().find_map(|name| {
        let bytes = std::fs::read(copy.join("blobs").join(name)).ok()?;
        let whole = bytes.len() >= 5
            && crc32fast::hash(&bytes[4..])
                == u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        (!whole).then(|| Damage {
            file: store_dir.join("blobs").join(name).display().to_string(),
            reason: "a value the store keeps in a file of its own (a large checkpoint, pending \
                     writes or a recorded call of its journal) fails its checksum: the store \
                     reads only what was written before it, and opening it to write would drop \
                     the rest for good"
                .to_string(),
            lost_checkpoints: false,
        })
    })
}

/// Copies a store into a fresh temporary directory (as `<tmp>/store`).
fn copy_to_temp(store_dir: &Path) -> Result<tempfile::TempDir, CheckpointError> {
    let mut last = None;
    for parent in temp_parents() {
        let attempt = tempfile::Builder::new()
            .prefix("stategraph-read-")
            .tempdir_in(&parent)
            .and_then(|dir| {
                let copy = dir.path().join("store");
                std::fs::create_dir(&copy)?;
                copy_tree(store_dir, &copy)?;
                Ok(dir)
            });
        match attempt {
            Ok(dir) => return Ok(dir),
            Err(e) => last = Some((parent, e)),
        }
    }
    let (parent, e) = last.unwrap_or_else(|| {
        (
            std::env::temp_dir(),
            std::io::Error::other("no temporary directory"),
        )
    });
    Err(CheckpointError::Storage(format!(
        "cannot copy the store at {} to read it (into {}): {e}",
        store_dir.display(),
        parent.display()
    )))
}

fn temp_parents() -> Vec<PathBuf> {
    let mut parents = vec![std::env::temp_dir()];
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() && !parents.contains(&shm) {
        parents.push(shm);
    }
    parents
}
