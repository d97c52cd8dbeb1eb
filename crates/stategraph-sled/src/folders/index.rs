//! A thread's line in the listing, and the index file that caches it.
//!
//! The index is derived from the store, never the other way round. It is written when the
//! process that held the thread lets it go, with the store's fingerprint (its files' names,
//! sizes and times) at that moment. A reader trusts it only while the fingerprint still matches;
//! a missing, damaged or stale index costs a read of the store, never a thread.
//!
//! It also bears witness: the newest checkpoint it names was on disk when the thread was let go.
//! A store that no longer holds it lost its end (a damaged or truncated file read back by sled as
//! a shorter log), and is reported as damaged instead of silently rolled back. A run killed
//! before it let go wrote no index: the flush witness beside the store (`flushed.json`, written
//! after each finished flush: `sled_store/witness.rs`) bears the same witness for it.

use super::damage::Damage;
use super::layout::new_marker_beside;
use super::read_copy::ReadCopy;
use crate::SledCheckpointer;
use serde::{Deserialize, Serialize};
use stategraph_checkpoint::{summarize, ThreadStatus, ThreadSummary};
use stategraph_checkpoint::{CheckpointError, CheckpointId};
use std::path::Path;

/// One thread as [`FolderCheckpointer::threads`](super::FolderCheckpointer::threads) lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadListing {
    /// The thread.
    pub thread_id: String,
    /// The thread at its newest readable checkpoint: `None` when nothing of it can be read.
    /// `status` is [`ThreadStatus::Running`] while another process holds the thread.
    pub summary: Option<ThreadSummary>,
    /// When its oldest kept checkpoint was written (ms since the epoch).
    pub created_at_ms: Option<u64>,
    /// Set when the store is damaged: it cannot be opened, or lost checkpoints it had.
    pub damage: Option<Damage>,
}

impl ThreadListing {
    /// The listing of a thread this process holds: running.
    pub(super) async fn of_held(
        store: &SledCheckpointer,
        thread: &str,
        created_at_ms: Option<u64>,
    ) -> Result<ThreadListing, CheckpointError> {
        let mut summary = summarize(store, thread).await?;
        if let Some(s) = &mut summary {
            s.status = ThreadStatus::Running;
        }
        // A thread made by this process had no checkpoint when it was taken: ask the store now.
        let created_at_ms =
            created_at_ms.or_else(|| store.first_checkpoint_time(thread).ok().flatten());
        Ok(ThreadListing {
            thread_id: thread.to_string(),
            summary,
            created_at_ms,
            damage: None,
        })
    }

    /// The listing read from a private copy of a store nobody holds, checked against the witness
    /// of its index and its flush witness.
    /// `None` when the store holds no checkpoint of the thread. A newest checkpoint that does not
    /// read back is damage, listed with what the witness last saw.
    pub(super) async fn of_store(
        copy: &ReadCopy,
        thread: &str,
        witness: Option<&ThreadListing>,
        store_dir: &Path,
    ) -> Result<Option<ThreadListing>, CheckpointError> {
        let seen = witness.and_then(|w| w.summary.as_ref());
        let log = || store_dir.join("db").display().to_string();
        let store = &copy.store;
        // What the writer's last finished flush made durable (`flushed.json`, as it was when the
        // copy was made): newer than the index when a run was killed, and there when a killed
        // run never wrote an index.
        let flushed = copy.flushed;
        let (summary, damage) = match summarize(store, thread).await {
            Ok(summary) => {
                let newest = summary.as_ref().map(|s| s.checkpoint_id);
                let by_flush = match flushed {
                    // The index saw the same (the thread was let go since): it tells it.
                    Some(f) if seen.is_some_and(|s| s.checkpoint_id == f.checkpoint) => None,
                    Some(f) if newest != Some(f.checkpoint) => {
                        let when = "its last flush finished";
                        lost_end(
                            store,
                            thread,
                            (f.step, f.checkpoint, when),
                            summary.as_ref(),
                            log(),
                        )
                        .await
                    }
                    _ => None,
                };
                let damage = match seen {
                    _ if by_flush.is_some() => by_flush,
                    Some(seen) if summary.as_ref() != Some(seen) => {
                        let when = "it was last closed";
                        let seen = (seen.step, seen.checkpoint_id, when);
                        lost_end(store, thread, seen, summary.as_ref(), log()).await
                    }
                    _ => None,
                };
                (summary, damage)
            }
            Err(e @ CheckpointError::Corrupt { .. }) => (
                seen.cloned(),
                Some(Damage {
                    file: log(),
                    reason: e.to_string(),
                    lost_checkpoints: false,
                }),
            ),
            Err(e) => return Err(e),
        };
        // A thread folder is only made to hold records: one whose store holds none at all (not
        // even how it was started) was emptied by damage, and is listed, not dropped. Unless it
        // is still marked new: its writer died before its first record reached the disk.
        let never_written = || new_marker_beside(store_dir).is_some_and(|m| m.exists());
        let damage = match damage {
            None if summary.is_none() && store.holds_nothing()? && !never_written() => {
                Some(Damage {
                    file: log(),
                    reason: "its store holds no record at all: its files were emptied or damaged"
                        .to_string(),
                    lost_checkpoints: true,
                })
            }
            other => other,
        };
        if summary.is_none() && damage.is_none() {
            return Ok(None);
        }
        Ok(Some(ThreadListing {
            thread_id: thread.to_string(),
            summary,
            created_at_ms: store.first_checkpoint_time(thread).ok().flatten(),
            damage,
        }))
    }
}

/// The damage when the checkpoint the index saw last is gone from the store. (One that is
/// there but does not read back is reported by whoever reads it.)
/// `seen` is the step and checkpoint a witness saw, and when (the index: when the thread was
/// last closed; the flush witness: when its last flush finished).
async fn lost_end(
    store: &SledCheckpointer,
    thread: &str,
    (step, checkpoint, when): (u64, CheckpointId, &str),
    now: Option<&ThreadSummary>,
    file: String,
) -> Option<Damage> {
    use stategraph_checkpoint::Checkpointer;
    if !matches!(
        store.get_checkpoint(thread, Some(checkpoint)).await,
        Ok(None)
    ) {
        return None;
    }
    let (holds, lost) = match now {
        Some(s) => (
            format!("its newest readable checkpoint is step {}", s.step),
            lost_steps(Some(s.step), step),
        ),
        None => (
            "it holds no readable checkpoint".to_string(),
            lost_steps(None, step),
        ),
    };
    Some(Damage {
        file,
        lost_checkpoints: true,
        reason: format!(
            "it held step {step} (checkpoint {checkpoint}) when {when}, but {holds}: the end of \
             its log was lost, and with it {lost}"
        ),
    })
}

/// The steps lost between the newest that reads (`now`) and the newest a witness saw.
pub(super) fn lost_steps(now: Option<u64>, seen: u64) -> String {
    match now {
        None if seen == 0 => "step 0".to_string(),
        None => format!("steps 0 to {seen}"),
        Some(now) if now + 1 == seen => format!("step {seen}"),
        Some(now) if now < seen => format!("steps {} to {seen}", now + 1),
        // A run from an earlier checkpoint (a rerun, an edit) numbers its steps from there.
        Some(_) => {
            format!("the checkpoint of step {seen} and those written since the newest that reads")
        }
    }
}

/// The index file: a thread's listing as of the moment its holder let it go.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct IndexEntry {
    /// The store's fingerprint when the listing was taken.
    pub fingerprint: String,
    pub listing: ThreadListing,
    /// The store's blob files then: each was whole when the store was closed, so one that fails
    /// its checksum later is damage, not a write a kill cut short. Consulted only when sled
    /// cannot be asked whether its log needs a failing blob (see `blobs.rs`).
    #[serde(default)]
    pub blobs: Vec<String>,
    /// The stamp ([`file_stamp`](super::layout::file_stamp)) of the thread's legacy `meta.json`
    /// then, when it had one: the listing says whether that record reads, and the file is not
    /// in the store, so the store's fingerprint does not see it change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_meta: Option<String>,
    /// The key of the required record the listing checked ([`RequiredRecord`](super::RequiredRecord)),
    /// if any: a reader that requires a record trusts only a listing that checked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
}

impl IndexEntry {
    /// Reads an index file; `None` when it is missing or does not decode (it is only a cache).
    pub(super) fn read(path: &Path) -> Option<IndexEntry> {
        let bytes = std::fs::read(path).ok()?;
        match serde_json::from_slice(&bytes) {
            Ok(entry) => Some(entry),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "ignoring a damaged index file; the store is read instead");
                None
            }
        }
    }

    /// Replaces the index file atomically. Best effort: a failure leaves an older or no index,
    /// which readers do not trust anyway.
    pub(super) fn write(&self, path: &Path) {
        let tmp = path.with_file_name(format!("index.json.{}.tmp", std::process::id()));
        let result = serde_json::to_vec_pretty(self)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!(file = %path.display(), error = %e, "could not update a thread's index");
        }
    }
}
