//! The per-thread layout's flush witness (`folders/layout.rs`, `flushed.json` beside a thread's
//! store): the thread's newest checkpoint (id and step) that a finished flush made durable,
//! written by the process writing the store after each flush, so that a store read back
//! shorter than it was written (a truncated or damaged log: sled reads a log up to its first bad message
//! and takes the rest for a torn write) is found without the thread's index, which a killed run
//! never wrote.
//!
//! Ordering is what keeps it from ever raising a false alarm:
//! - the newest checkpoint is noted after sled took its record, and read by the flush before
//!   sled's flush starts, so every checkpoint the witness can name was written before that flush;
//! - the witness is written only once sled's flush (an fsync of the log) returned: it never names
//!   a checkpoint that is not on disk. A crash between the two leaves the older witness, which
//!   names less than the disk holds (a weaker check, never a wrong one);
//! - it carries a checksum, and is read whole or not at all: a torn or damaged witness does not
//!   read and is ignored (it is not fsynced: losing it to a power cut only weakens the check);
//! - a deletion of the checkpoint it names (repair removing an unreadable head) first makes the
//!   witness name the newest checkpoint that stays, durably (fsynced: a power cut must not bring
//!   back the name of what the deletion then removed for good), then deletes.
//!
//! How it is written: overwritten in place, at offset 0 of a file the writer keeps open, always
//! at the same length (its JSON padded with spaces to the length the thread's longest record
//! takes). A write and a rename per flush cost the kernel an inode, a directory update and, on
//! ext4, a flush of the new file's data at the rename; an overwrite in place of an allocated
//! block is one `pwrite`. What the rename gave, the format keeps: a write cut short (a power
//! cut mid-sector, a reader racing the writer) leaves bytes of two records, which fail the
//! checksum (it covers every field) or the JSON, and so read as no witness: a weaker check,
//! never a false alarm. Files written by the rename of earlier versions are the same JSON
//! unpadded, and read as before; a reader of an earlier version reads the padded file too
//! (JSON allows trailing spaces). The first write over an older, longer file cuts it to the
//! new length after writing: a crash in between leaves trailing bytes, which do not read.
//!
//! Only the store's writer writes it: a read never writes.

use super::SledCheckpointer;
use serde::{Deserialize, Serialize};
use stategraph_checkpoint::{CheckpointError, CheckpointId, Checkpointer};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a store's last finished flush made durable of its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Flushed {
    pub checkpoint: CheckpointId,
    pub step: u64,
}

/// The witness file as it is written: the thread it is of, what was flushed, and a checksum of
/// the two.
#[derive(Serialize, Deserialize)]
struct WitnessFile {
    thread: String,
    #[serde(flatten)]
    flushed: Flushed,
    check: String,
}

fn checksum(thread: &str, flushed: &Flushed) -> String {
    let mut h = blake3::Hasher::new();
    h.update(thread.as_bytes());
    h.update(&[0]);
    h.update(flushed.checkpoint.as_bytes());
    h.update(&flushed.step.to_le_bytes());
    h.finalize().to_hex()[..16].to_string()
}

/// Reads the witness of `thread` in `file`: `None` when there is none, or it does not read
/// (torn, damaged or of another thread), which only costs the check it would have made.
///
/// A file that does not read is read once more before it is ignored: a reader racing the
/// writer's overwrite in place (a reader of a thread whose holder does not answer reads while
/// it may write) sees a torn record once, the next read a whole one.
pub(crate) fn read_flushed(file: &Path, thread: &str) -> Option<Flushed> {
    let mut failure = None;
    for _ in 0..2 {
        let bytes = std::fs::read(file).ok()?;
        match parse_flushed(&bytes, thread) {
            Ok(flushed) => return Some(flushed),
            Err(why) => failure = Some(why),
        }
    }
    if let Some(why) = failure {
        tracing::warn!(file = %file.display(), reason = %why, "ignoring a flush witness that does not read");
    }
    None
}

/// The witness of `thread` in `bytes`, or why they are none.
fn parse_flushed(bytes: &[u8], thread: &str) -> Result<Flushed, String> {
    let parsed: WitnessFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if parsed.thread != thread {
        return Err(format!("it is the witness of thread {}", parsed.thread));
    }
    if parsed.check != checksum(thread, &parsed.flushed) {
        return Err("it fails its checksum".to_string());
    }
    Ok(parsed.flushed)
}

/// The witness file's bytes: its JSON, padded with spaces to `len` (when shorter).
fn witness_bytes(thread: &str, flushed: Flushed, len: usize) -> std::io::Result<Vec<u8>> {
    let body = WitnessFile {
        thread: thread.to_string(),
        flushed,
        check: checksum(thread, &flushed),
    };
    let mut bytes = serde_json::to_vec(&body).map_err(std::io::Error::other)?;
    if bytes.len() < len {
        bytes.resize(len, b' ');
    }
    Ok(bytes)
}

/// The length every witness of `thread` is written at: that of its longest record (the step
/// with the most digits), so an overwrite in place always covers the one before.
fn padded_len(thread: &str) -> usize {
    let longest = Flushed {
        checkpoint: CheckpointId::nil(),
        step: u64::MAX,
    };
    witness_bytes(thread, longest, 0).map_or(0, |b| b.len())
}

/// The open witness file of a store's writer, overwritten in place.
struct WitnessWriter {
    file: std::fs::File,
    /// Whether the file is known to be `len` bytes long (else the first write cuts it).
    sized: bool,
}

impl Watch {
    /// Overwrites the witness with `flushed` (see the module's documentation); with `durable`,
    /// it is on disk when this returns.
    fn write(&mut self, flushed: Flushed, durable: bool) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let bytes = witness_bytes(&self.thread, flushed, self.len)?;
        if self.writer.is_none() {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.file)?;
            self.writer = Some(WitnessWriter { file, sized: false });
        }
        let Some(writer) = self.writer.as_mut() else {
            return Ok(());
        };
        let written = writer.file.write_all_at(&bytes, 0).and_then(|()| {
            if !writer.sized {
                // An older witness (unpadded, or of a longer record) is cut after the write.
                if writer.file.metadata()?.len() != bytes.len() as u64 {
                    writer.file.set_len(bytes.len() as u64)?;
                }
                writer.sized = true;
            }
            if durable {
                writer.file.sync_data()?;
            }
            Ok(())
        });
        if written.is_err() {
            // Opened afresh next time.
            self.writer = None;
        }
        written
    }

    /// Removes the witness, durably: the store no longer holds anything it could name.
    fn remove(&mut self) -> std::io::Result<()> {
        self.writer = None;
        match std::fs::remove_file(&self.file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => other?,
        }
        match self.file.parent() {
            Some(dir) => std::fs::File::open(dir)?.sync_all(),
            None => Ok(()),
        }
    }
}

/// Removes the temporary files of witness writes (by a rename, as earlier versions wrote it) a
/// killed writer left: the caller is the store's only writer now.
fn remove_torn_writes(file: &Path) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = entry.file_name().to_string_lossy().into_owned();
        if n.starts_with(&prefix) && n.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A store's witness, when its layout keeps one (`None` fields otherwise).
#[derive(Default)]
pub(super) struct FlushWitness {
    inner: Mutex<Option<Watch>>,
}

struct Watch {
    file: PathBuf,
    thread: String,
    /// The length the witness is written at ([`padded_len`]).
    len: usize,
    /// The file, once written by this store.
    writer: Option<WitnessWriter>,
    /// The thread's newest checkpoint written to sled (not necessarily flushed).
    newest: Option<Flushed>,
    /// What the file says now (as this process wrote it).
    on_disk: Option<Flushed>,
}

impl FlushWitness {
    fn with<R>(&self, f: impl FnOnce(&mut Option<Watch>) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// After a checkpoint's record went into sled.
    pub(super) fn saw(&self, thread: &str, checkpoint: CheckpointId, step: u64) {
        self.with(|w| {
            if let Some(w) = w.as_mut().filter(|w| w.thread == thread) {
                if w.newest.is_none_or(|n| n.checkpoint <= checkpoint) {
                    w.newest = Some(Flushed { checkpoint, step });
                }
            }
        })
    }

    /// Before a flush starts: what the witness should say once it finished, if that is news.
    pub(super) fn due(&self) -> Option<Flushed> {
        self.with(|w| {
            w.as_ref()
                .and_then(|w| w.newest.filter(|n| Some(*n) != w.on_disk))
        })
    }

    /// After a flush that started after [`due`](Self::due) returned `flushed` finished.
    pub(super) fn flushed(&self, flushed: Flushed) {
        self.with(|w| {
            let Some(w) = w.as_mut() else { return };
            // A newer one may have been written by a later flush meanwhile.
            if w.on_disk.is_some_and(|d| d.checkpoint > flushed.checkpoint) {
                return;
            }
            match w.write(flushed, false) {
                Ok(()) => w.on_disk = Some(flushed),
                Err(e) => {
                    tracing::debug!(file = %w.file.display(), error = %e, "could not update the flush witness")
                }
            }
        })
    }

    /// Whether deleting `ids` of `thread` deletes what the witness names or will name.
    fn names_any(&self, thread: &str, ids: &[CheckpointId]) -> bool {
        self.with(|w| {
            w.as_ref().is_some_and(|w| {
                w.thread == thread
                    && [w.newest, w.on_disk]
                        .iter()
                        .flatten()
                        .any(|f| ids.contains(&f.checkpoint))
            })
        })
    }

    /// Makes the witness name `newest` (or removes it, for `None`) now, durably: the caller has
    /// made `newest` durable, and deletes what the witness named once this returns.
    fn retreat_to(&self, newest: Option<Flushed>) {
        self.with(|w| {
            let Some(w) = w.as_mut() else { return };
            w.newest = newest;
            let result = match newest {
                Some(n) => w.write(n, true),
                None => w.remove(),
            };
            match result {
                Ok(()) => w.on_disk = newest,
                Err(e) => {
                    tracing::warn!(file = %w.file.display(), error = %e, "could not update the flush witness")
                }
            }
        })
    }
}

impl SledCheckpointer {
    /// Keeps the flush witness of `thread` in `file` (see the module's documentation) from now
    /// on, starting from `newest`, the thread's newest checkpoint in the store, which the next
    /// flush writes. Only the process writing the store calls this.
    pub(crate) fn keep_flush_witness(&self, file: PathBuf, thread: &str, newest: Option<Flushed>) {
        remove_torn_writes(&file);
        self.witness.with(|w| {
            *w = Some(Watch {
                file,
                thread: thread.to_string(),
                len: padded_len(thread),
                writer: None,
                newest,
                on_disk: None,
            })
        });
    }

    /// Before `ids` of `thread` are deleted: when the witness names one of them, the newest
    /// checkpoint that stays is made durable and named first, so that no crash leaves a witness
    /// naming a checkpoint that is gone on purpose.
    pub(super) async fn witness_before_delete(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        if !self.witness.names_any(thread, ids) {
            return Ok(());
        }
        let stays = self
            .checkpoint_ids(thread)?
            .into_iter()
            .find(|id| !ids.contains(id));
        let newest = match stays {
            Some(id) => match self.get_checkpoint(thread, Some(id)).await {
                Ok(Some(r)) => Some(Flushed {
                    checkpoint: id,
                    step: r.step,
                }),
                // A checkpoint that stays but does not read is no witness's to name.
                _ => None,
            },
            None => None,
        };
        self.flush_now()?;
        self.witness.retreat_to(newest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::{
        CheckpointMetadata, CheckpointRecord, Frontier, Source, StateData,
    };

    fn record(id: u128, step: u64) -> CheckpointRecord {
        CheckpointRecord {
            thread_id: "t".to_string(),
            id: CheckpointId::from_u128(id),
            parent_id: None,
            step,
            state: StateData::Snapshot(serde_json::value::to_raw_value(&[step]).unwrap()),
            frontier: Frontier::default(),
            metadata: CheckpointMetadata {
                source: Source::Loop,
                writers: vec![],
                created_at_ms: 1,
                schema_version: 0,
                run_id: "r".into(),
                graph: None,
            },
        }
    }

    #[tokio::test]
    async fn the_witness_names_what_a_flush_made_durable_and_retreats_before_a_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("flushed.json");
        let store = SledCheckpointer::open(dir.path().join("store")).unwrap();
        store.keep_flush_witness(file.clone(), "t", None);
        // Not flushed: nothing is witnessed yet.
        store.put_checkpoint(&record(1, 0), false).await.unwrap();
        assert_eq!(read_flushed(&file, "t"), None);
        store.put_checkpoint(&record(2, 1), true).await.unwrap();
        let second = Flushed {
            checkpoint: CheckpointId::from_u128(2),
            step: 1,
        };
        assert_eq!(read_flushed(&file, "t"), Some(second));
        // A subgraph's checkpoint is not the thread's.
        let mut child = record(3, 0);
        child.thread_id = "t/child".into();
        store.put_checkpoint(&child, true).await.unwrap();
        assert_eq!(read_flushed(&file, "t"), Some(second));
        // Deleting what it names makes it name the newest that stays first.
        store
            .delete_checkpoints("t", &[CheckpointId::from_u128(2)])
            .await
            .unwrap();
        let first = Flushed {
            checkpoint: CheckpointId::from_u128(1),
            step: 0,
        };
        assert_eq!(read_flushed(&file, "t"), Some(first));
        // Of another thread, torn or damaged: it does not read.
        assert_eq!(read_flushed(&file, "u"), None);
        let mut bytes = std::fs::read(&file).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(read_flushed(&file, "t"), None);
        std::fs::write(&file, &bytes[..at]).unwrap();
        assert_eq!(read_flushed(&file, "t"), None);
    }

    #[tokio::test]
    async fn the_witness_is_overwritten_in_place_at_one_length_and_an_earlier_versions_reads() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("flushed.json");
        let flushed = |id: u128, step: u64| Flushed {
            checkpoint: CheckpointId::from_u128(id),
            step,
        };
        // As an earlier version wrote it (by a rename, unpadded), then padded past this
        // version's length: both read.
        let old = serde_json::to_vec(&WitnessFile {
            thread: "t".into(),
            flushed: flushed(1, 0),
            check: checksum("t", &flushed(1, 0)),
        })
        .unwrap();
        std::fs::write(&file, &old).unwrap();
        assert_eq!(read_flushed(&file, "t"), Some(flushed(1, 0)));
        let mut long = old.clone();
        long.resize(1000, b' ');
        std::fs::write(&file, &long).unwrap();
        assert_eq!(read_flushed(&file, "t"), Some(flushed(1, 0)));

        let store = SledCheckpointer::open(dir.path().join("store")).unwrap();
        store.put_checkpoint(&record(1, 0), true).await.unwrap();
        store.keep_flush_witness(file.clone(), "t", Some(flushed(1, 0)));
        let inode = std::fs::metadata(&file).unwrap().ino();
        let mut written = Vec::new();
        for (id, step) in [(2, 1), (3, 10), (4, 12_345_678_901)] {
            store.put_checkpoint(&record(id, step), true).await.unwrap();
            assert_eq!(read_flushed(&file, "t"), Some(flushed(id, step)));
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!(meta.len(), padded_len("t") as u64, "cut to one length");
            assert_eq!(meta.ino(), inode, "overwritten in place, not replaced");
            written.push((flushed(id, step), std::fs::read(&file).unwrap()));
        }
        // A write cut short, or a reader racing the writer: bytes of two records, at any split,
        // read as one of the two or as none, never as a third.
        for (a, a_bytes) in &written {
            for (b, b_bytes) in &written {
                for at in 0..a_bytes.len() {
                    let mut torn = a_bytes[..at].to_vec();
                    torn.extend_from_slice(&b_bytes[at..]);
                    std::fs::write(&file, &torn).unwrap();
                    let read = read_flushed(&file, "t");
                    assert!(
                        read.is_none() || read == Some(*a) || read == Some(*b),
                        "split at {at}: {read:?}"
                    );
                }
            }
        }
        // Deleting everything it could name removes it; the next flush writes it afresh.
        let all: Vec<_> = (1..=4).map(CheckpointId::from_u128).collect();
        store.delete_checkpoints("t", &all).await.unwrap();
        assert!(!file.exists());
        store.put_checkpoint(&record(5, 0), true).await.unwrap();
        assert_eq!(read_flushed(&file, "t"), Some(flushed(5, 0)));
    }
}
