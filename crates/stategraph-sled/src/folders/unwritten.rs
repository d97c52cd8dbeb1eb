//! Folders of threads never written: marked `new` (`layout.rs`), their store holding no record
//! (or not made yet), and no process holding their lock. What a run left that died before its
//! first record reached the disk: no thread (not listed), only a few KB on disk, which
//! [`FolderCheckpointer::remove_never_written`] removes (`graph prune`).

use super::layout::FileLock;
use super::read_copy::{open_copy, Copied};
use super::{FolderCheckpointer, Slot};
use crate::sled_store::remove_mark;
use stategraph_checkpoint::CheckpointError;

impl FolderCheckpointer {
    /// Removes the folders of threads never written whose process is gone (see the module's
    /// documentation) and returns how many. A folder whose lock a process holds is left alone:
    /// that process is making the thread now (it takes the lock before it marks the folder, and
    /// keeps it until it lets the thread go). A marked folder whose store holds records is
    /// kept, without its mark, which is no longer true.
    pub async fn remove_never_written(&self) -> Result<usize, CheckpointError> {
        if self.layout.is_single_store() {
            return Ok(0);
        }
        let names = self.layout.thread_names().map_err(|e| {
            super::io_error("cannot list threads in", &self.layout.threads_dir(), e)
        })?;
        let mut removed = 0;
        for root in names {
            if self.remove_if_never_written(&root).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes the thread's folder when it was never written and nobody holds it; true when it
    /// did.
    async fn remove_if_never_written(&self, root: &str) -> Result<bool, CheckpointError> {
        let marker = self.layout.new_marker(root);
        if !marker.exists() || matches!(self.slot(root), Some(Slot::Held(_))) {
            return Ok(false);
        }
        let lock_path = self.layout.lock_path(root);
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(&lock_path) else {
            // No lock file: the folder is being deleted, or is no thread folder of ours.
            return Ok(false);
        };
        // Not waiting for it: a lock held is a live process making (or taking over) the thread.
        let lock = match FileLock::try_take(file, true) {
            Ok(Some(lock)) if lock.still_at(&lock_path) => lock,
            _ => return Ok(false),
        };
        // Asked again under the lock: its last holder may have written a record and let go.
        if !marker.exists() {
            return Ok(false);
        }
        let store_dir = self.layout.store_dir(root);
        let never_written = match open_copy(&store_dir, root, self.options, &[]) {
            // Its process died before sled made the store.
            Ok(Copied::Missing) => true,
            Ok(Copied::Open(copy)) => match copy.store.holds_nothing() {
                Ok(true) => copy.damage.is_none(),
                Ok(false) => {
                    // Read from the disk, under the thread's lock: the mark is stale.
                    remove_mark(&marker);
                    false
                }
                Err(_) => false,
            },
            // A reader is copying it (tried again next time), or it does not open: left as it
            // is, for `graph threads` to show.
            Ok(Copied::Busy) | Err(_) => false,
        };
        if !never_written {
            return Ok(false);
        }
        // A reader still copying it after a while: tried again next time.
        let Ok(_readers_done) = self.exclude_readers(root).await else {
            return Ok(false);
        };
        let trash = self.trash_folder(root);
        drop(lock);
        remove_trash(&trash?);
        Ok(true)
    }
}

/// Removes a folder renamed away by [`FolderCheckpointer::trash_folder`]; one that cannot be
/// removed now is swept by a later command (`Layout::sweep_deleted`).
pub(super) fn remove_trash(trash: &std::path::Path) {
    if let Err(e) = std::fs::remove_dir_all(trash) {
        tracing::warn!(path = %trash.display(), error = %e, "thread deleted, but its folder could not be removed yet");
    }
}
