//! Letting a held thread go: its writes made durable, its line indexed, its store closed, its
//! lock given up; at once ([`FolderCheckpointer::release`]), or detached at once and closed on a
//! blocking thread ([`FolderCheckpointer::release_in_background`]).
//!
//! Closing a store costs fsyncs and file writes. A server that lets a thread go after each run
//! does it from inside its bookkeeping of runs: there, closing inline would stall every request
//! behind the file system. Detaching is what makes the background safe: the thread leaves this
//! process's table at once, so a new writer here takes it through its lock file like any other
//! process (and waits for the closing to end: its lock is held until then), and a reader reads
//! it through the holder's socket (this process's, answering until the store closes) or, once
//! closed, from a copy. [`FolderCheckpointer::close`] waits for the closings still running.

use super::index::{IndexEntry, ThreadListing};
use super::layout::{blob_names, file_stamp, fingerprint, Layout};
use super::required::{with_required_checked, RequiredRecord};
use super::{wait_for_sole, FolderCheckpointer, Held, Slot};
use stategraph_checkpoint::{root_thread, summarize, CheckpointError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long [`FolderCheckpointer::close`] waits for closings still running in the background.
const CLOSINGS_PATIENCE: Duration = Duration::from_secs(10);

/// The threads being let go in the background (one entry per closing, a thread may have two).
#[derive(Default)]
pub(super) struct Closings(Arc<(Mutex<Vec<String>>, Condvar)>);

/// One closing in the background (or a take being undone, `opening.rs`); counted until
/// dropped.
pub(super) struct Closing {
    closings: Arc<(Mutex<Vec<String>>, Condvar)>,
    root: String,
}

impl Closings {
    pub(super) fn start(&self, root: &str) -> Closing {
        self.0
             .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(root.to_string());
        Closing {
            closings: self.0.clone(),
            root: root.to_string(),
        }
    }

    /// Whether this process is still closing `root`: its lock is this process's own, and a
    /// writer here waits for it rather than asking the thread's holder (itself, until the
    /// store closes) whether it is busy.
    pub(super) fn is_closing(&self, root: &str) -> bool {
        self.0
             .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|r| r == root)
    }

    /// Waits (at most [`CLOSINGS_PATIENCE`]) until no closing runs.
    pub(super) fn wait(&self) {
        let deadline = Instant::now() + CLOSINGS_PATIENCE;
        let (roots, done) = &*self.0;
        let mut running = roots.lock().unwrap_or_else(|p| p.into_inner());
        while !running.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    closing = running.len(),
                    "threads still closing after {} s: their index lines are written by the next \
                     process that lists them",
                    CLOSINGS_PATIENCE.as_secs()
                );
                return;
            }
            running = done
                .wait_timeout(running, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        let (roots, done) = &*self.closings;
        let mut running = roots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = running.iter().position(|r| *r == self.root) {
            running.swap_remove(at);
        }
        done.notify_all();
    }
}

impl FolderCheckpointer {
    /// Lets the thread go as [`release`](Self::release) does, with the closing done on one of
    /// tokio's blocking threads (here, without a runtime): the thread is detached from this
    /// process at once, so the caller does not wait for the file system. A writer in this
    /// process that takes the thread meanwhile waits for the closing to end, as one in another
    /// process would; errors are logged (what was flushed before stays).
    ///
    /// ```no_run
    /// # async fn demo(store: stategraph_sled::FolderCheckpointer) -> Result<(), stategraph_checkpoint::CheckpointError> {
    /// store.hold_stored("thread-1").await?;
    /// // ... run it ...
    /// store.release_in_background("thread-1");
    /// store.close(); // waits for the closing
    /// # Ok(()) }
    /// ```
    pub fn release_in_background(&self, thread: &str) {
        let root = root_thread(thread).to_string();
        let held = match self.take_slot(&root) {
            Some(Slot::Held(held)) => held,
            Some(other) => return self.set_slot(&root, other),
            None => return,
        };
        let (layout, required) = (self.layout.clone(), self.required);
        let closing = self.closings.start(&root);
        let close = move || {
            if let Err(e) = let_go(&layout, required.as_ref(), &root, held) {
                tracing::warn!(thread = %root, error = %e, "could not close the thread's store cleanly");
            }
            drop(closing);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(close)),
            Err(_) => close(),
        }
    }

    /// Closes a held thread (see [`let_go`]).
    pub(super) fn let_go(&self, root: &str, held: Arc<Held>) -> Result<(), CheckpointError> {
        let_go(&self.layout, self.required.as_ref(), root, held)
    }
}

/// Closes a held thread: flushes, lists it, closes the store, records the index entry with the
/// closed store's fingerprint, then unlocks.
fn let_go(
    layout: &Layout,
    required: Option<&RequiredRecord>,
    root: &str,
    held: Arc<Held>,
) -> Result<(), CheckpointError> {
    let Held {
        store,
        lock,
        server,
    } = match Arc::try_unwrap(wait_for_sole(held)) {
        Ok(held) => held,
        // Still in use after all: flush, and leave closing to the last user.
        Err(held) => return held.store.flush_now(),
    };
    drop(server);
    // Removes the thread's mark of being new when this is its first flush of a record.
    let flushed = store.flush_now();
    let store_dir = layout.store_dir(root);
    let legacy = layout.legacy_meta_path(root);
    // The store answers without awaiting anything, so this is ready at its first poll; polled
    // here rather than with an executor of its own, which would panic when `release` is called
    // from a `futures` executor. Not ready: no index line, which the next listing writes.
    let listing = futures::FutureExt::now_or_never(async {
        let summary = summarize(store.as_ref(), root).await.ok().flatten();
        let listing = ThreadListing {
            thread_id: root.to_string(),
            summary,
            created_at_ms: store.first_checkpoint_time(root).ok().flatten(),
            damage: None,
        };
        // The index is what `threads` trusts while the store is unchanged: it says so too.
        with_required_checked(required, Some(listing), store.as_ref(), &store_dir, &legacy).await
    })
    .flatten();
    let closed = Arc::try_unwrap(wait_for_sole(store)).is_ok();
    if flushed.is_ok() && closed && lock.still_at(&layout.lock_path(root)) {
        if let (Some(print), Some(listing)) = (fingerprint(&store_dir), listing) {
            IndexEntry {
                fingerprint: print,
                listing,
                blobs: blob_names(&store_dir),
                legacy_meta: file_stamp(&legacy),
                required: required.map(|r| r.key.to_string()),
            }
            .write(&layout.index_path(root));
        }
    }
    drop(lock);
    flushed
}
