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
        // sled only warns when its configuration fails its checksum, then trusts what it reads:
        // a flipped digit would make it refuse the store with a message of versions, or open it
        // with a segment size it was not written with. Damage, named, which a repair rebuilds.
        if conf_is_damaged(&path.join("conf")) {
            return Err(CheckpointError::Damaged {
                thread: String::new(),
                file: "conf".to_string(),
                reason: "sled's configuration file fails its checksum".to_string(),
            });
        }
        let config = |size: usize| {
            sled::Config::new()
                .path(&path)
                .segment_size(size)
                .cache_capacity(options.cache_capacity)
        };
        let open = || match open_without_panic(&config(size)) {
            // An existing store keeps the segment size it was created with; sled names it.
            Err(e) => match created_with_segment_size(&e) {
                Some(stored) if stored != size => open_without_panic(&config(stored)),
                _ => Err(e),
            },
            opened => opened,
        };
        let open = || super::closing::open_past_own_close(&path, open, is_locked);
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
            witness: Default::default(),
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

/// Opens a store, a panic of sled's recovery taken as what it is: a log that does not read back
/// as it was written. sled 0.34 panics ("tried to serialize Uninitialized") when it writes the
/// snapshot of a page table whose pages a damaged blob file left unread; a file must never crash
/// the program that reads it.
fn open_without_panic(config: &sled::Config) -> sled::Result<sled::Db> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| config.open())).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "an internal error".to_string());
            tracing::debug!(panic = %what, "sled panicked while recovering the store");
            Err(sled::Error::Corruption { at: None, bt: () })
        },
    )
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
    if is_locked(&e) {
        CheckpointError::Locked {
            path: path.display().to_string(),
        }
    } else {
        CheckpointError::Storage(format!("cannot open store at {}: {e}", path.display()))
    }
}

/// sled's refusal of a store another handle holds.
fn is_locked(e: &sled::Error) -> bool {
    match e {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("lock")
        }
        _ => false,
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
/// its last four bytes). One of 8 bytes or fewer is not: sled takes it for missing and writes it
/// afresh (what a kill while sled created the store leaves).
fn conf_is_damaged(conf: &Path) -> bool {
    let Ok(bytes) = std::fs::read(conf) else {
        return false;
    };
    if bytes.len() <= 8 {
        return false;
    }
    let (text, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    crc32fast::hash(text) != stored
}

/// The configuration file sled 0.34 writes for a store of `segment_size` (`StorageParameters`
/// in sled's `config.rs`): its text, then a CRC32 of it, little-endian. Compression is off
/// (sled is built without it here).
fn conf_bytes(segment_size: usize) -> Vec<u8> {
    let mut bytes =
        format!("segment_size: {segment_size}\nuse_compression: false\nversion: 0.34\n")
            .into_bytes();
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Replaces a store's damaged configuration file (moved to `aside`, kept to look at) with the
/// one sled wrote when it created the store: its content is known but for the segment size,
/// which is read from the damaged file when its line still reads as one sled accepts (one
/// flipped byte cannot turn one power of two into another), else found by trying: the size
/// under which a throwaway copy of the store reads the most records (a log read with another
/// size than it was written with stops early or fails).
pub(crate) fn rebuild_conf(
    store: &Path,
    aside: &Path,
    options: SledOptions,
) -> Result<(), CheckpointError> {
    let conf = store.join("conf");
    let damaged = std::fs::read(&conf).unwrap_or_default();
    let size = String::from_utf8_lossy(&damaged)
        .lines()
        .find_map(|line| {
            line.strip_prefix("segment_size: ")?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .filter(|n| n.is_power_of_two() && (256..=1 << 24).contains(n))
        .unwrap_or_else(|| segment_size_by_trying(store, options));
    let io = |what: &str, e: std::io::Error| {
        CheckpointError::Storage(format!("cannot {what} {}: {e}", conf.display()))
    };
    std::fs::rename(&conf, aside).map_err(|e| io("set aside", e))?;
    std::fs::write(&conf, conf_bytes(size)).map_err(|e| io("rebuild", e))
}

/// The segment size under which a copy of the store (its configuration written for that size)
/// reads the most records: the one set in `options` first, then sled's own default, then every
/// other size sled accepts. Ties go to the earlier.
fn segment_size_by_trying(store: &Path, options: SledOptions) -> usize {
    let mut sizes = vec![options.segment_size, 512 * 1024];
    sizes.extend((8..=24).map(|bits| 1usize << bits));
    sizes.dedup();
    let mut best = (options.segment_size, 0);
    let mut tried = Vec::new();
    for size in sizes {
        if tried.contains(&size) {
            continue;
        }
        tried.push(size);
        if let Some(records) = records_read_with(store, size, options) {
            if records > best.1 {
                best = (size, records);
            }
        }
    }
    best.0
}

/// How many records a throwaway copy of `store` reads with its configuration written for
/// `segment_size`; `None` when sled refuses it.
fn records_read_with(store: &Path, segment_size: usize, options: SledOptions) -> Option<usize> {
    let dir = tempfile::tempdir().ok()?;
    let copy = dir.path().join("store");
    copy_plain(store, &copy).ok()?;
    std::fs::write(copy.join("conf"), conf_bytes(segment_size)).ok()?;
    let options = SledOptions {
        segment_size,
        ..options
    };
    let opened = SledCheckpointer::open_with(&copy, options).ok()?;
    let records = [&opened.checkpoints, &opened.journal, &opened.threads]
        .iter()
        .map(|t| t.len())
        .sum();
    Some(records)
}

/// Copies a directory tree (a store).
fn copy_plain(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_plain(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
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
        let config = sled::Config::new()
            .path(dir.path())
            .segment_size(SledOptions::default().segment_size);
        let plain =
            super::super::closing::open_past_own_close(dir.path(), || config.open(), is_locked);
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
    fn a_rebuilt_configuration_is_what_sled_writes_and_keeps_the_segment_size() {
        let dir = tempfile::tempdir().unwrap();
        let options = SledOptions {
            segment_size: 512 * 1024,
            ..SledOptions::default()
        };
        drop(SledCheckpointer::open_with(dir.path(), options).unwrap());
        let conf = dir.path().join("conf");
        let written = std::fs::read(&conf).unwrap();
        assert_eq!(written, conf_bytes(512 * 1024), "what sled writes");
        // The pagecache version's major digit, flipped: sled would refuse the store.
        let mut damaged = written.clone();
        let at = String::from_utf8_lossy(&written).find("0.34").unwrap();
        damaged[at] ^= 0x01;
        std::fs::write(&conf, &damaged).unwrap();
        match SledCheckpointer::open_with(dir.path(), options) {
            Err(CheckpointError::Damaged { file, .. }) => assert_eq!(file, "conf"),
            other => panic!("{:?}", other.map(|_| ())),
        }
        let aside = dir.path().join("damaged-conf");
        rebuild_conf(dir.path(), &aside, SledOptions::default()).unwrap();
        assert_eq!(std::fs::read(&conf).unwrap(), written);
        assert_eq!(std::fs::read(&aside).unwrap(), damaged);
        drop(SledCheckpointer::open_with(dir.path(), SledOptions::default()).unwrap());
    }

    #[tokio::test]
    async fn a_segment_size_that_no_longer_reads_is_found_by_trying() {
        let dir = tempfile::tempdir().unwrap();
        let options = SledOptions {
            segment_size: 512 * 1024,
            ..SledOptions::default()
        };
        let store = SledCheckpointer::open_with(dir.path(), options).unwrap();
        // More log than one 64 KiB segment holds: under another size it does not all read.
        for n in 0..20u128 {
            let mut r = record("t");
            r.id = stategraph_checkpoint::CheckpointId::from_u128(n + 1);
            let text = format!("{n:x}").repeat(5000);
            r.state = StateData::Snapshot(serde_json::value::to_raw_value(&[text]).unwrap());
            store.put_checkpoint(&r, true).await.unwrap();
        }
        drop(store);
        let conf = dir.path().join("conf");
        let written = std::fs::read(&conf).unwrap();
        // `segment_size: 524288` -> `segment_size: 5242?8`: no size sled accepts.
        let mut damaged = written.clone();
        damaged[18] = b'?';
        std::fs::write(&conf, &damaged).unwrap();
        rebuild_conf(
            dir.path(),
            &dir.path().join("damaged-conf"),
            SledOptions::default(),
        )
        .unwrap();
        assert_eq!(std::fs::read(&conf).unwrap(), written);
        let store = SledCheckpointer::open(dir.path()).unwrap();
        assert_eq!(store.checkpoint_ids("t").unwrap().len(), 20);
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
