//! The per-thread layout's flush witness (`folders/layout.rs`, `flushed.json` beside a thread's
//! store): the thread's newest checkpoint (id and step) that a finished flush made durable,
//! written by the process writing the store after each flush, so that a store read back shorter
//! than it was written (a truncated or damaged log: sled reads a log up to its first bad message
//! and takes the rest for a torn write) is found without the thread's index, which a killed run
//! never wrote.
//!
//! Ordering is what keeps it from ever raising a false alarm:
//! - the newest checkpoint is noted after sled took its record, and read by the flush before
//!   sled's flush starts, so every checkpoint the witness can name was written before that flush;
//! - the witness is written only once sled's flush (an fsync of the log) returned: it never names
//!   a checkpoint that is not on disk. A crash between the two leaves the older witness, which
//!   names less than the disk holds (a weaker check, never a wrong one);
//! - it is replaced by a rename, and carries a checksum: a torn or damaged witness does not read
//!   and is ignored (it is not fsynced: losing it to a power cut only weakens the check);
//! - a deletion of the checkpoint it names (repair removing an unreadable head) first makes the
//!   witness name the newest checkpoint that stays, then deletes.
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
pub(crate) fn read_flushed(file: &Path, thread: &str) -> Option<Flushed> {
    let bytes = std::fs::read(file).ok()?;
    let parsed: WitnessFile = match serde_json::from_slice(&bytes) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "ignoring a flush witness that does not read");
            return None;
        }
    };
    if parsed.thread != thread || parsed.check != checksum(thread, &parsed.flushed) {
        tracing::warn!(file = %file.display(), "ignoring a flush witness that fails its checksum");
        return None;
    }
    Some(parsed.flushed)
}

/// Replaces the witness file by a rename: it reads whole or not at all.
fn write_flushed(file: &Path, thread: &str, flushed: Flushed) -> std::io::Result<()> {
    let body = WitnessFile {
        thread: thread.to_string(),
        flushed,
        check: checksum(thread, &flushed),
    };
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = file.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = serde_json::to_vec(&body)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, file));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes the temporary files of witness writes a killed writer left: the caller is the
/// store's only writer now.
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
            match write_flushed(&w.file, &w.thread, flushed) {
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

    /// Makes the witness name `newest` (or removes it, for `None`) now: the caller has made
    /// `newest` durable.
    fn retreat_to(&self, newest: Option<Flushed>) {
        self.with(|w| {
            let Some(w) = w.as_mut() else { return };
            w.newest = newest;
            let result = match newest {
                Some(n) => write_flushed(&w.file, &w.thread, n),
                None => match std::fs::remove_file(&w.file) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
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
}
