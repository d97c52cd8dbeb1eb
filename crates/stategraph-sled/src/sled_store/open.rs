//! Opening a store, and what sled's refusals mean: a store keeps the segment size it was
//! created with; a snapshot file sled left unfinished is moved aside; a corrupt store names its
//! damaged file; a locked store, a full disk and anything else are told apart.

use super::{SledCheckpointer, SledOptions};
use crate::io_failure::IoFailure;
use stategraph_checkpoint::group_commit::GroupCommit;
use stategraph_checkpoint::CheckpointError;
use std::collections::{HashMap, HashSet};
use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::Mutex;

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
            unwritten: super::mark::UnwrittenMark::none(),
            path,
        })
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
        if let CheckpointError::DiskFull { path } = crate::io_failure::io_error(path, io) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::{
        CheckpointMetadata, CheckpointRecord, Checkpointer, Frontier, Source, StateData,
    };

    fn record(thread: &str) -> CheckpointRecord {
        CheckpointRecord {
            thread_id: thread.to_string(),
            id: stategraph_checkpoint::CheckpointId::from_u128(7),
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
