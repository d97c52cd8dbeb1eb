//! Repairing a damaged thread: an explicit act that keeps a backup first.
//!
//! Reads never repair (see `read_copy.rs`), and writes refuse a store that lost checkpoints
//! since it was last closed. A repair copies the thread's folder to `<root>/backups/`, opens the
//! store as sled recovers it (setting aside a snapshot file sled cannot read), then removes the
//! newest checkpoints that do not read back (or whose chain of deltas is broken) until the newest
//! one is whole, so the thread can be resumed from there.

use super::blobs::damaged_blob;
use super::index::IndexEntry;
use super::layout::{copy_tree, io_error};
use super::{FolderCheckpointer, Take};
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
    /// Where the thread's folder was copied before anything was changed.
    pub backup: PathBuf,
    /// Files of the store set aside (renamed to `damaged-<name>`) because sled could not read
    /// them.
    pub set_aside: Vec<String>,
    /// Checkpoints removed because they did not read back or their chain was broken, newest
    /// first.
    pub removed: Vec<CheckpointId>,
    /// The step the thread's index had seen before the damage, when the store no longer holds it.
    pub lost_from_step: Option<u64>,
    /// A blob file that failed its checksum: sled dropped it, and everything written after it,
    /// when the store was opened to repair it (the backup keeps them).
    pub damaged_blob: Option<String>,
    /// The thread now, at its newest checkpoint; `None` when nothing of it could be kept.
    pub now: Option<ThreadSummary>,
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
        let backup = self.back_up(&root)?;
        let store_dir = self.layout.store_dir(&root);
        // Named before sled's recovery drops it (see `blobs.rs`).
        let blobs = index
            .as_ref()
            .map(|e| e.blobs.as_slice())
            .unwrap_or_default();
        let damaged_blob =
            damaged_blob(&store_dir, &store_dir, blobs, self.options).map(|d| d.file);
        let witness = index.and_then(|e| e.listing.summary);
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
            .filter(|w| {
                now.as_ref()
                    .is_none_or(|n| n.checkpoint_id < w.checkpoint_id)
            })
            .map(|w| w.step);
        let held = self.held_from(&root, lock, std::sync::Arc::new(store))?;
        self.set_slot(&root, super::Slot::Held(held));
        self.release(&root)?;
        Ok(RepairReport {
            thread_id: root,
            backup,
            set_aside,
            removed,
            lost_from_step,
            damaged_blob,
            now,
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
/// its page table, rebuilt from the log; its configuration, written afresh) is set aside
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
                std::fs::rename(&from, &to).map_err(|e| io_error("cannot set aside", &from, e))?;
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
