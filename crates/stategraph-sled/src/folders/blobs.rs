//! Whether a store's blob files are whole, and whether one that is not is damage.
//!
//! sled (0.34) keeps a value larger than a quarter of a segment (a large checkpoint, pending
//! writes, a recorded call of the journal) in a file of its own, `blobs/<lsn>`: a CRC-32 of the
//! rest (4 bytes, little-endian), a kind byte, then the value (`pagecache/blob_io.rs`). The
//! message of the log that names it is at log position `<lsn>`. On opening a store, sled reads
//! the log's segments from the one its last snapshot (of where its pages are) points into on,
//! reads every blob a message there names, and at a blob that fails its checksum stops as if the
//! log ended there; then it removes every blob file at or after where the log ended
//! (`gc_blobs`): the store rolls back in silence, for good. (A failing blob named in an older
//! segment is read only when its value is, and that read fails: loud, not silent.)
//!
//! A blob file that fails its checksum is not always damage: sled writes the whole file before
//! the message that names it reaches the log, so a writer killed while writing one leaves a cut
//! file that no message names, past the end of the log, which sled rightly removes. Damage is a
//! blob that fails where sled's opening stops at it, asked of sled itself in throwaway copies
//! ([`reaches_past`]): whether the log reaches past it, and whether sled, opening the store as
//! it is, stops there. That needs no index, so it covers a thread indexed before indexes named
//! blobs, a single store of many threads, and blobs written since the index. The index's list
//! (blobs that were whole when the store was closed) decides only when the copies cannot be
//! made. Nothing in the store is written to find out.

use super::damage::Damage;
use super::layout::blob_names;
use super::temp_copy::copy_to_temp;
use crate::sled_store::rebuild_conf;
use crate::{SledCheckpointer, SledOptions};
use stategraph_checkpoint::CheckpointError;
use std::path::Path;

/// Why a blob that fails its checksum inside the log is damage.
const DAMAGED_BLOB: &str = "a value the store keeps in a file of its own (a large checkpoint, \
     pending writes or a recorded call of its journal) fails its checksum: the store reads only \
     what was written before it, and opening it to write would drop the rest for good";

/// A log position far past any store's end: a file named so is always past the log.
const FAR_PAST_THE_END: i64 = i64::MAX - 1;

/// What checking a store's blob files found.
pub(super) struct BlobCheck {
    /// The first blob file that fails its checksum while inside the log.
    pub damage: Option<Damage>,
    /// When there is damage: the threads the whole log holds, read in the throwaway copy where
    /// sled read past the damaged file (empty when that could not be told). A reader of the
    /// store itself does not see those whose every record was written after it.
    pub threads: Vec<String>,
}

/// The first blob file of the store at `store` (a reader's copy, or a store about to be opened)
/// that fails its checksum while inside the store's log, named as the file of `original` it
/// stands for. `indexed` are the blob files the thread's index saw whole (empty when it does
/// not say). Reads `store`, never writes it.
pub(super) fn damaged_blob(
    store: &Path,
    original: &Path,
    indexed: &[String],
    options: SledOptions,
) -> Option<Damage> {
    check_blobs(store, original, indexed, options).damage
}

/// Like [`damaged_blob`], with the threads the whole log holds.
pub(super) fn check_blobs(
    store: &Path,
    original: &Path,
    indexed: &[String],
    options: SledOptions,
) -> BlobCheck {
    // Sorted by log position: sled stops at the first.
    let mut failing: Vec<i64> = blob_names(store)
        .iter()
        // sled ignores a file whose name is not a log position.
        .filter_map(|name| name.parse::<i64>().ok())
        .filter(|lsn| !is_whole(&store.join("blobs").join(lsn.to_string())))
        .collect();
    failing.sort_unstable();
    let mut check = BlobCheck {
        damage: None,
        threads: Vec::new(),
    };
    if failing.is_empty() {
        return check;
    }
    let damage = |lsn: i64, reason: String| Damage {
        file: original
            .join("blobs")
            .join(lsn.to_string())
            .display()
            .to_string(),
        reason,
        lost_checkpoints: false,
    };
    let known: Vec<i64> = failing
        .iter()
        .copied()
        .filter(|lsn| indexed.contains(&lsn.to_string()))
        .collect();
    let inside = match reaches_past(store, &failing, options) {
        Ok(log) => {
            check.threads = log.threads;
            log.inside
        }
        Err(e) if known.is_empty() => {
            // Cannot tell a cut write from damage: say so rather than call it whole.
            check.damage = Some(damage(
                failing[0],
                format!("{DAMAGED_BLOB} (whether the store still needs it could not be told: {e})"),
            ));
            return check;
        }
        Err(_) => Vec::new(),
    };
    check.damage = failing
        .into_iter()
        .find(|lsn| known.contains(lsn) || inside.contains(lsn))
        .map(|lsn| damage(lsn, DAMAGED_BLOB.to_string()));
    if check.damage.is_none() {
        check.threads.clear();
    }
    check
}

/// Whether a blob file passes its checksum (a missing file is not a damaged one: sled skips a
/// message whose blob is gone, as it is once the value was replaced).
fn is_whole(file: &Path) -> bool {
    let Ok(bytes) = std::fs::read(file) else {
        return true;
    };
    bytes.len() >= 5
        && crc32fast::hash(&bytes[4..])
            == u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Which of the log positions `lsns` (of blob files that fail their checksum) lie inside the
/// log of the store at `store` where sled stops when it opens the store, asked of sled in
/// throwaway copies.
///
/// In the copy the failing files are removed, so sled reads past the messages that name them
/// (a message whose blob is gone is skipped), to the true end of the log; an empty file is put at
/// each position + 1, and one far past any end. On opening, sled removes every blob file at or
/// after the end of the log. A message takes more than one byte, so the file at position + 1
/// stays exactly when a message at that position is in the log; no message ever starts there, so
/// sled never reads it. The far file is the control: when it stays, sled found no log at all
/// (nothing it opened can name a blob), and no position is inside.
fn reaches_past(
    store: &Path,
    lsns: &[i64],
    options: SledOptions,
) -> Result<WholeLog, CheckpointError> {
    let whole = markers_kept(store, lsns, true, options)?;
    let inside: Vec<i64> = match whole.far_kept {
        true => Vec::new(),
        false => lsns
            .iter()
            .zip(&whole.kept)
            .filter(|(_, kept)| **kept)
            .map(|(lsn, _)| *lsn)
            .collect(),
    };
    if inside.is_empty() {
        return Ok(WholeLog {
            inside,
            threads: whole.threads,
        });
    }
    // Inside the log. sled reads at opening only the segments of the log from its last record
    // of where its pages are (its snapshot) on: a blob named in an older segment is read (and
    // fails, loudly) only when its value is, and opening drops nothing. As the store is, the
    // marker after a blob sled stops at goes with the end of the log; the others stay.
    let as_is = markers_kept(store, lsns, false, options);
    let stops_at = |i: usize| match &as_is {
        Ok(m) => !m.kept[i],
        // sled refused the store as it is: what it read first decides nothing here (the
        // reader's own opening says why); a blob inside the log is then taken as damage.
        Err(_) => true,
    };
    let inside = lsns
        .iter()
        .enumerate()
        .filter(|(i, lsn)| inside.contains(lsn) && stops_at(*i))
        .map(|(_, lsn)| *lsn)
        .collect();
    Ok(WholeLog {
        inside,
        threads: whole.threads,
    })
}

/// What opening a throwaway copy with markers left.
struct Markers {
    /// Per position, whether the marker at position + 1 stayed.
    kept: Vec<bool>,
    /// Whether the marker far past any end stayed (sled found no log).
    far_kept: bool,
    /// The threads the opened copy holds.
    threads: Vec<String>,
}

/// Opens a throwaway copy of `store` with an empty marker file at each of `lsns` + 1 and one far
/// past any end, the failing blob files at `lsns` removed first when `remove` says so, and says
/// which markers sled left.
fn markers_kept(
    store: &Path,
    lsns: &[i64],
    remove: bool,
    options: SledOptions,
) -> Result<Markers, CheckpointError> {
    let dir = copy_to_temp(store)?;
    let copy = dir.path().join("store");
    let blobs = copy.join("blobs");
    let io = |e: std::io::Error| {
        CheckpointError::Storage(format!(
            "cannot prepare a copy of {} to check its blob files: {e}",
            store.display()
        ))
    };
    if remove {
        for lsn in lsns {
            std::fs::remove_file(blobs.join(lsn.to_string())).map_err(io)?;
        }
    }
    let markers: Vec<i64> = lsns.iter().map(|lsn| lsn + 1).collect();
    for marker in markers.iter().chain([&FAR_PAST_THE_END]) {
        let file = blobs.join(marker.to_string());
        // A failing blob right after another is not a marker: no message starts inside
        // another, so both are told apart by their own markers.
        if !file.exists() {
            std::fs::write(file, b"").map_err(io)?;
        }
    }
    let opened = open_setting_aside_bookkeeping(&copy, dir.path(), options)?;
    // Only the names: the small tree of thread names never goes to a blob file, so skipping a
    // message that named one left it whole; what the skipped value was part of is not read.
    let threads = opened.root_threads().unwrap_or_default();
    drop(opened);
    Ok(Markers {
        kept: markers
            .iter()
            .map(|m| blobs.join(m.to_string()).exists())
            .collect(),
        far_kept: blobs.join(FAR_PAST_THE_END.to_string()).exists(),
        threads,
    })
}

/// What sled found reading a store's whole log in a throwaway copy.
struct WholeLog {
    /// The positions (of failing blob files) inside the log where sled, opening the store as
    /// it is, stops.
    inside: Vec<i64>,
    /// The threads the log holds.
    threads: Vec<String>,
}

/// Opens a throwaway copy; a file of sled's own bookkeeping it refuses (its page table's
/// snapshot, rebuilt from the log; its configuration, rebuilt as sled wrote it) is moved to `aside` and
/// the copy opened again.
fn open_setting_aside_bookkeeping(
    copy: &Path,
    aside: &Path,
    options: SledOptions,
) -> Result<SledCheckpointer, CheckpointError> {
    let mut set_aside = Vec::new();
    loop {
        match SledCheckpointer::open_with(copy, options) {
            Err(CheckpointError::Damaged { file, .. })
                if (file.starts_with("snap.") || file == "conf") && !set_aside.contains(&file) =>
            {
                match file.as_str() {
                    "conf" => rebuild_conf(copy, &aside.join(&file), options)?,
                    _ => std::fs::rename(copy.join(&file), aside.join(&file)).map_err(|e| {
                        CheckpointError::Storage(format!("cannot set aside {file} in a copy: {e}"))
                    })?,
                }
                set_aside.push(file);
            }
            opened => return opened,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::Checkpointer;
    use std::path::PathBuf;

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<_> = walk(dir).into_iter().collect();
        out.sort();
        out
    }

    fn walk(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
        out
    }

    /// A store holding one journal value large enough for a blob file, then a small one after
    /// it; closed.
    fn store_with_a_blob(dir: &Path) -> PathBuf {
        let store = SledCheckpointer::open(dir).unwrap();
        let big = serde_json::json!("a recorded answer ".repeat(2_000));
        futures::executor::block_on(async {
            store.put_journal("t", "big", &big).await.unwrap();
            store
                .put_journal("u", "after", &serde_json::json!(1))
                .await
                .unwrap();
            store.flush_now().unwrap();
        });
        drop(store);
        let names = blob_names(dir);
        assert_eq!(names.len(), 1, "{names:?}");
        dir.join("blobs").join(&names[0])
    }

    #[test]
    fn a_blob_inside_the_log_that_fails_its_checksum_is_damage_found_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let blob = store_with_a_blob(dir.path());
        let mut bytes = std::fs::read(&blob).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&blob, bytes).unwrap();
        let before = files(dir.path());

        let check = check_blobs(dir.path(), dir.path(), &[], SledOptions::default());
        let damage = check.damage.expect("damage");
        assert_eq!(damage.file, blob.display().to_string());
        assert_eq!(files(dir.path()), before, "the store was written");
    }

    #[test]
    fn a_cut_blob_past_the_end_of_the_log_is_not_damage() {
        let dir = tempfile::tempdir().unwrap();
        let blob = store_with_a_blob(dir.path());
        let lsn: i64 = blob.file_name().unwrap().to_str().unwrap().parse().unwrap();
        // What a writer killed while writing its next blob leaves: a cut file no message names.
        let cut = dir.path().join("blobs").join((lsn + 1_000_000).to_string());
        std::fs::write(&cut, b"cut").unwrap();
        let check = check_blobs(dir.path(), dir.path(), &[], SledOptions::default());
        assert!(check.damage.is_none(), "{:?}", check.damage);
        // Unless the index saw it whole when the store was closed.
        let name = cut.file_name().unwrap().to_str().unwrap().to_string();
        let indexed = damaged_blob(dir.path(), dir.path(), &[name], SledOptions::default());
        assert_eq!(indexed.map(|d| d.file), Some(cut.display().to_string()));
    }
}

#[cfg(test)]
mod older_segments {
    use super::*;
    use stategraph_checkpoint::Checkpointer;

    #[test]
    fn a_failing_blob_sled_does_not_read_at_opening_is_not_damage_and_opening_drops_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let options = SledOptions {
            segment_size: 4096,
            ..SledOptions::default()
        };
        let store = SledCheckpointer::open_with(dir.path(), options).unwrap();
        let big = serde_json::json!("a recorded answer ".repeat(200));
        futures::executor::block_on(async {
            store.put_journal("t", "big", &big).await.unwrap();
            // Enough after it to fill many segments.
            for i in 0..200 {
                let small = serde_json::json!(format!("value {i} ").repeat(20));
                store
                    .put_journal("t", &format!("k{i}"), &small)
                    .await
                    .unwrap();
            }
            store.flush_now().unwrap();
        });
        drop(store);
        // Opened again, sled writes its snapshot: its next opening starts from a later segment.
        drop(SledCheckpointer::open_with(dir.path(), options).unwrap());
        // The oldest blob file: a node holding the big value, since written again elsewhere.
        let oldest = blob_names(dir.path())
            .into_iter()
            .min_by_key(|n| n.parse::<i64>().unwrap())
            .unwrap();
        let blob = dir.path().join("blobs").join(oldest);
        let mut bytes = std::fs::read(&blob).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&blob, bytes).unwrap();

        let check = check_blobs(dir.path(), dir.path(), &[], options);
        assert!(check.damage.is_none(), "{:?}", check.damage);
        // Opening to write drops nothing.
        let store = SledCheckpointer::open_with(dir.path(), options).unwrap();
        let (big, after) = futures::executor::block_on(async {
            (
                store.get_journal("t", "big").await,
                store.get_journal("t", "k199").await,
            )
        });
        assert!(matches!(big, Ok(Some(_))), "{big:?}");
        assert!(matches!(after, Ok(Some(_))), "{after:?}");
    }
}
