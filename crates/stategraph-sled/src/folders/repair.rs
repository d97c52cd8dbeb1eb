//! Repairing a damaged thread: an explicit act that keeps a backup first.
//!
//! Reads never repair (see `read_copy.rs`), and writes refuse a store that lost checkpoints
//! since it was last closed. A repair copies the thread's folder to `<root>/backups/`, opens the
//! store as sled recovers it (setting aside a snapshot file sled cannot read), then removes the
//! newest checkpoints that do not read back (or whose chain of deltas is broken) until the newest
//! one is whole, so the thread can be resumed from there. It looks first, at a private copy
//! (`read_copy.rs`), at what a reader would find: a healthy thread is left as it is, with no
//! backup, and a thread that holds nothing is not there to repair.

use super::blobs::damaged_blob;
use super::index::{IndexEntry, ThreadListing};
use super::layout::{copy_tree, flushed_beside, io_error};
use super::read_copy::{open_copy, Copied};
use super::required::with_required_checked;
use super::{FolderCheckpointer, Take};
use crate::sled_store::{read_flushed, rebuild_conf, Flushed};
use crate::SledCheckpointer;
use serde::Serialize;
use stategraph_checkpoint::root_thread;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::Checkpointer;
use stategraph_checkpoint::{summarize, ThreadSummary};
use stategraph_checkpoint::{CheckpointId, StateData};
use std::path::{Path, PathBuf};

/// What [`FolderCheckpointer::repair`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RepairReport {
    /// The thread.
    pub thread_id: String,
    /// True when nothing was wrong: nothing was changed, and no backup made.
    pub healthy: bool,
    /// Where the thread's folder was copied before anything was changed; `None` when nothing
    /// needed changing.
    pub backup: Option<PathBuf>,
    /// Files of the store set aside (renamed to `damaged-<name>`) because sled could not read
    /// them; `conf`, sled's configuration, is written again as sled wrote it.
    pub set_aside: Vec<String>,
    /// Checkpoints removed because they did not read back or their chain was broken, newest
    /// first.
    pub removed: Vec<CheckpointId>,
    /// The step the thread had reached before the damage, when the store no longer holds it (as
    /// its flush witness or its index saw it): the steps after [`now`](Self::now)'s up to this
    /// one were lost.
    pub lost_from_step: Option<u64>,
    /// A blob file that failed its checksum: sled dropped it, and everything written after it,
    /// when the store was opened to repair it (the backup keeps them).
    pub damaged_blob: Option<String>,
    /// The thread now, at its newest checkpoint; `None` when nothing of it could be kept.
    pub now: Option<ThreadSummary>,
    /// True when nothing of the thread could be kept: its folder was removed (the backup keeps
    /// it as it was), so the thread is gone.
    pub gone: bool,
}

/// What a look at a private copy of a thread's store found, before a repair changes anything.
enum Found {
    /// A reader finds nothing wrong.
    Healthy(Option<ThreadSummary>),
    /// No checkpoint, and no sign of damage: there is no thread to repair.
    Nothing,
    /// Something to repair (or something that cannot be told without trying).
    Damaged,
}

impl FolderCheckpointer {
    /// Repairs a damaged thread (see [`CheckpointError::Damaged`]): copies its folder to
    /// `<root>/backups/<thread>-<time>/`, reopens its store as sled recovers it, and removes the
    /// newest checkpoints that cannot be read until the newest is whole. The thread is then
    /// writable again, from that checkpoint. Refused while another process holds the thread.
    pub async fn repair(&self, thread: &str) -> Result<RepairReport, CheckpointError> {
        if let Some(how) = self.single_store_recovery() {
            let damage = match self.damage(thread).await {
                Ok(Some(d)) => format!("it is damaged: {} (file {}). ", d.reason, d.file),
                _ => String::new(),
            };
            return Err(CheckpointError::Storage(format!("{damage}{how}")));
        }
        let root = root_thread(thread).to_string();
        // This process lets go of anything it had of the thread: the repair starts from disk.
        self.release(&root)?;
        self.take_slot(&root);
        let lock = self.lock_thread(&root, Take::Existing).await?;
        let index = IndexEntry::read(&self.layout.index_path(&root));
        match self.look(&root, index.as_ref()).await? {
            Found::Healthy(now) => {
                return Ok(RepairReport {
                    thread_id: root,
                    healthy: true,
                    backup: None,
                    set_aside: Vec::new(),
                    removed: Vec::new(),
                    lost_from_step: None,
                    damaged_blob: None,
                    now,
                    gone: false,
                })
            }
            Found::Nothing => return Err(CheckpointError::ThreadNotFound { thread: root }),
            Found::Damaged => {}
        }
        let backup = self.back_up(&root)?;
        let store_dir = self.layout.store_dir(&root);
        // Named before sled's recovery drops it (see `blobs.rs`).
        let blobs = index
            .as_ref()
            .map(|e| e.blobs.as_slice())
            .unwrap_or_default();
        let damaged_blob =
            damaged_blob(&store_dir, &store_dir, blobs, self.options).map(|d| d.file);
        // What the store held before the damage, as its witnesses saw it: the flush witness
        // (newer, and there when a killed run wrote no index) or the index.
        let witness = index
            .and_then(|e| e.listing.summary)
            .map(|s| (s.checkpoint_id, s.step));
        let flushed = flushed_beside(&store_dir)
            .and_then(|f| read_flushed(&f, &root))
            .map(|f| (f.checkpoint, f.step));
        let witness = match (witness, flushed) {
            (Some(i), Some(f)) => Some(if f.0 >= i.0 { f } else { i }),
            (i, f) => f.or(i),
        };
        let (store, set_aside) = open_setting_aside(&store_dir, &root, self.options)
            .await
            .map_err(|e| {
                CheckpointError::Storage(format!(
                    "cannot repair thread `{root}`: {e}; its folder as it was is kept in {}",
                    backup.display()
                ))
            })?;
        let removed = remove_unreadable_head(&store, &root).await?;
        let now = summarize(&store, &root).await?;
        let lost_from_step = witness
            .filter(|(id, _)| now.as_ref().is_none_or(|n| n.checkpoint_id < *id))
            .map(|(_, step)| step);
        // The witness names the repaired head from the next flush (on letting go) on: the
        // checkpoints it named before are gone on purpose now.
        if let Some(file) = flushed_beside(&store_dir) {
            let head = now.as_ref().map(|n| Flushed {
                checkpoint: n.checkpoint_id,
                step: n.step,
            });
            store.keep_flush_witness(file, &root, head);
        }
        let held = self.held_from(&root, lock, std::sync::Arc::new(store));
        self.set_slot(&root, super::Slot::Held(held));
        self.release(&root)?;
        let gone = now.is_none();
        if gone {
            // Nothing of it reads: a folder kept would only be listed as damaged again. The
            // backup holds it as it was.
            self.delete_folder(&root).await?;
        }
        Ok(RepairReport {
            thread_id: root,
            healthy: false,
            backup: Some(backup),
            set_aside,
            removed,
            lost_from_step,
            damaged_blob,
            now,
            gone,
        })
    }

    /// Looks at a private copy of the thread's store (its lock held, so no writer changes it)
    /// as a reader would: its files, its newest checkpoint against the index's witness, its
    /// required record and the chain of deltas its newest checkpoint builds on.
    async fn look(&self, root: &str, index: Option<&IndexEntry>) -> Result<Found, CheckpointError> {
        let store_dir = self.layout.store_dir(root);
        let blobs = index.map(|e| e.blobs.as_slice()).unwrap_or_default();
        let copy = match open_copy(&store_dir, root, self.options, blobs) {
            Ok(Copied::Open(copy)) => copy,
            Ok(Copied::Missing) => return Ok(Found::Nothing),
            Ok(Copied::Busy) | Err(_) => return Ok(Found::Damaged),
        };
        if copy.damage.is_some() {
            return Ok(Found::Damaged);
        }
        let witness = index.map(|e| &e.listing);
        let Ok(listing) = ThreadListing::of_store(&copy, root, witness, &store_dir).await else {
            return Ok(Found::Damaged);
        };
        let legacy = self.layout.legacy_meta_path(root);
        let required = self.required.as_ref();
        let listing =
            with_required_checked(required, listing, &copy.store, &store_dir, &legacy).await;
        let Some(listing) = listing else {
            return Ok(Found::Nothing);
        };
        if listing.damage.is_some() {
            return Ok(Found::Damaged);
        }
        let whole = match copy.store.checkpoint_ids(root)?.first() {
            Some(newest) => chain_is_whole(&copy.store, root, *newest).await,
            None => false,
        };
        Ok(match whole {
            true => Found::Healthy(listing.summary),
            false => Found::Damaged,
        })
    }

    /// Copies the thread's folder to a new backup folder.
    fn back_up(&self, root: &str) -> Result<PathBuf, CheckpointError> {
        let stamp = stategraph_checkpoint::now_ms();
        let dir = self
            .layout
            .root()
            .join("backups")
            .join(format!("{root}-{stamp}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| io_error("cannot create the backup folder", &dir, e))?;
        copy_tree(&self.layout.thread_dir(root), &dir)
            .map_err(|e| io_error("cannot back up the thread into", &dir, e))?;
        Ok(dir)
    }
}

/// Opens the store for writing; a file of sled's own bookkeeping that it refuses (a snapshot of
/// its page table, rebuilt from the log; its configuration, rebuilt as sled wrote it) is set aside
/// (renamed) and the store opened again, as long as that helps.
async fn open_setting_aside(
    store_dir: &Path,
    root: &str,
    options: super::SledOptions,
) -> Result<(SledCheckpointer, Vec<String>), CheckpointError> {
    let mut set_aside = Vec::new();
    loop {
        match SledCheckpointer::open_with(store_dir, options) {
            Ok(store) => return Ok((store, set_aside)),
            Err(CheckpointError::Damaged { file, reason, .. }) => {
                let from = store_dir.join(&file);
                let bookkeeping = file.starts_with("snap.") || file == "conf";
                if !bookkeeping || set_aside.contains(&file) {
                    return Err(CheckpointError::Damaged {
                        thread: root.to_string(),
                        file: from.display().to_string(),
                        reason: format!("{reason}; the repair cannot recover from it"),
                    });
                }
                let to = store_dir.join(format!("damaged-{file}"));
                if file == "conf" {
                    // Its content is known: written again as sled wrote it.
                    rebuild_conf(store_dir, &to, options)?;
                } else {
                    std::fs::rename(&from, &to)
                        .map_err(|e| io_error("cannot set aside", &from, e))?;
                }
                set_aside.push(file);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Removes the newest checkpoints that do not read back, or whose chain of deltas reaches a
/// checkpoint that does not, until the newest one is whole. Returns the removed ids.
async fn remove_unreadable_head(
    store: &SledCheckpointer,
    root: &str,
) -> Result<Vec<CheckpointId>, CheckpointError> {
    let mut removed = Vec::new();
    for id in store.checkpoint_ids(root)? {
        if chain_is_whole(store, root, id).await {
            break;
        }
        removed.push(id);
    }
    if !removed.is_empty() {
        store.delete_checkpoints(root, &removed).await?;
    }
    Ok(removed)
}

/// Whether a checkpoint and every checkpoint its deltas build on read back.
async fn chain_is_whole(store: &SledCheckpointer, root: &str, id: CheckpointId) -> bool {
    let mut next = Some(id);
    while let Some(id) = next {
        match store.get_checkpoint(root, Some(id)).await {
            Ok(Some(record)) => match record.state {
                StateData::Snapshot(_) => return true,
                StateData::Delta(_) => next = record.parent_id,
            },
            _ => return false,
        }
    }
    false
}
