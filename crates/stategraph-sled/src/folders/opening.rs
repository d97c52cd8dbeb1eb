//! Opening the store of a thread this process has just locked: the last step of a take, and the
//! only one that makes anything on disk (a new thread's mark and store).
//!
//! A take is a future, and a future can be dropped at any await (a `graph run` stopped in its
//! first moments, a request given up). What the take made must then go with it, or a folder
//! that is no thread stays behind. That holds by construction here:
//!
//! 1. [`Opening`], a guard, owns the thread's lock from the moment the take holds it: there is
//!    no await between `lock_thread` handing the lock back and the guard taking it. Whoever
//!    drops the guard before it is handed over undoes the take; nothing else can.
//! 2. sled's open (and what reads the store it opened) runs on one of tokio's blocking threads,
//!    and the guard is *moved into* that work. A take dropped while it waits drops only its
//!    handle on the work: the work runs to its end and tokio drops its output (the guard, with
//!    the store) when nobody waits for it, or drops the work with the guard in it when it never
//!    ran (the runtime shutting down). So the undoing always comes after sled's open returned,
//!    never beside a store still being made. (A take dropped after that work ended but before
//!    it collected the result undoes it on the thread dropping it: milliseconds of file work,
//!    on a path only a stop takes.)
//! 3. The undoing keeps the order of a thread let go: the store closes first, then, for a take
//!    that made the thread (no store was there under the lock), the folder is renamed away and
//!    removed while the lock is still held (as a deletion does: nobody sees it half gone), then
//!    the lock goes. A take of a thread that existed undoes nothing but that order: its store is
//!    closed before another writer can take the lock.
//! 4. After the work hands the guard back, nothing awaits until the thread is held (served, and
//!    put in the process's table by `take`).
//! 5. The guard counts as a closing (`letting.rs`): [`FolderCheckpointer::close`] waits for an
//!    abandoned take to be undone, so a command that ends right after a stop leaves no folder.
//!
//! Before the store is opened, a take of a thread that exists checks it (`verify_before_writing`,
//! which only reads); dropped there, its guard only unlocks.

use super::layout::{flushed_beside, io_error, FileLock, Layout};
use super::letting::Closing;
use super::unwritten::remove_trash;
use super::waiting::{blocking, Waiting};
use super::{FolderCheckpointer, Held, Take, RETRY, WRITE_PATIENCE};
use crate::sled_store::{remove_mark, Flushed};
use crate::{SledCheckpointer, SledOptions};
use futures::FutureExt;
use stategraph_checkpoint::{CheckpointError, Checkpointer};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long undoing a take waits for sled to let go of the store it opened (its last writes
/// run on its own threads) before the folder is removed anyway: longer than they take.
const SLED_PATIENCE: Duration = Duration::from_secs(3);

/// A take from the lock on, until the thread is held: undone when dropped before
/// [`hand_over`](Opening::hand_over) (see the module's documentation).
pub(super) struct Opening {
    layout: Layout,
    root: String,
    options: SledOptions,
    how: Take,
    /// This take makes the thread: its store was not there under the lock.
    making: bool,
    /// `None` once handed over: nothing left to undo.
    lock: Option<FileLock>,
    store: Option<Arc<SledCheckpointer>>,
    /// Counted until the guard is gone, after its undoing: `close()` waits for it.
    _closing: Closing,
}

impl FolderCheckpointer {
    /// Opens the store of a thread whose lock this process now holds (see the module's
    /// documentation for what a take dropped on the way leaves).
    pub(super) async fn open_held(
        &self,
        root: &str,
        lock: FileLock,
        how: Take,
    ) -> Result<Arc<Held>, CheckpointError> {
        let store_dir = self.layout.store_dir(root);
        // Asked under the lock: nobody makes a thread's store without it.
        let making = matches!(how, Take::New | Take::Any) && !store_dir.exists();
        let opening = Opening {
            layout: self.layout.clone(),
            root: root.to_string(),
            options: self.options,
            how,
            making,
            lock: Some(lock),
            store: None,
            _closing: self.closings.start(root),
        };
        if making {
            // Before sled makes the store: a process that dies before its first record reaches
            // the disk leaves a folder marked as never written, not one that looks emptied. (A
            // take dropped, or failing, has its guard remove the folder instead.)
            let marker = self.layout.new_marker(root);
            std::fs::write(&marker, b"")
                .map_err(|e| io_error("cannot mark the new thread's folder", &marker, e))?;
        } else {
            // A store not there yet has nothing to verify.
            self.verify_before_writing(root, &store_dir).await?;
        }
        // sled's open reads and rewrites files (recovery, a snapshot): off the async threads,
        // with the guard (point 2 of the module's documentation).
        let mut opened = blocking(move || opening.open()).await?;
        let (lock, store) = opened.hand_over()?;
        Ok(self.held_from(root, lock, store))
    }
}

impl Opening {
    /// Opens the store, checks the thread is there (or not) as the take asks, and keeps what
    /// its flushes must know (the flush witness, the mark of a thread never written). Blocks on
    /// the file system. An error drops the guard here: the take is undone.
    fn open(mut self) -> Result<Self, CheckpointError> {
        let store_dir = self.layout.store_dir(&self.root);
        let deadline = Instant::now() + WRITE_PATIENCE;
        let mut waiting = Waiting::default();
        let store = loop {
            match SledCheckpointer::open_with(&store_dir, self.options) {
                Ok(store) => break Arc::new(store),
                // A reader is copying it.
                Err(CheckpointError::Locked { .. }) if Instant::now() < deadline => {
                    waiting.say(&self.root, "a reader is copying its store");
                    std::thread::sleep(RETRY);
                }
                Err(CheckpointError::Damaged { file, reason, .. }) => {
                    return Err(CheckpointError::Damaged {
                        thread: self.root.clone(),
                        file: store_dir.join(file).display().to_string(),
                        reason,
                    })
                }
                Err(e) => return Err(e),
            }
        };
        // The guard's from now on: an error below closes it before the lock goes.
        self.store = Some(store.clone());
        // sled reads without awaiting anything, so this is ready at its first poll; polled
        // here rather than with an executor of its own, which would panic when the take's
        // caller is itself on a `futures` executor (without a tokio runtime the work runs
        // inline, inside the caller's poll).
        let newest = check_presence(&self.root, &store, self.how)
            .now_or_never()
            .unwrap_or_else(|| {
                Err(CheckpointError::Storage(format!(
                    "thread `{}`: its store did not answer at once when opened; nothing was \
                     made, try again",
                    self.root
                )))
            })?;
        if let Some(file) = flushed_beside(&store_dir) {
            store.keep_flush_witness(file, &self.root, newest);
        }
        let marker = self.layout.new_marker(&self.root);
        if store.holds_nothing()? {
            // Marked now, or by a run that died before its first record reached the disk: the
            // first flush that makes a record durable removes it.
            store.remove_once_written(marker);
        } else {
            // What it holds was read from the disk: a leftover mark is no longer true.
            remove_mark(&marker);
        }
        Ok(self)
    }

    /// The lock and the opened store, for the thread to be held: the take is complete, and
    /// the guard has nothing left to undo.
    fn hand_over(&mut self) -> Result<(FileLock, Arc<SledCheckpointer>), CheckpointError> {
        match (self.lock.take(), self.store.take()) {
            (Some(lock), Some(store)) => Ok((lock, store)),
            // Not reached: `open` returns the guard only with both.
            _ => Err(CheckpointError::Storage(format!(
                "thread `{}`: its store was not opened; nothing was made, try again",
                self.root
            ))),
        }
    }

    /// Removes the folder of a thread this take was making, under its lock: renamed away first,
    /// as a deletion is, so it vanishes whole; a removal cut short leaves only a dot-folder that
    /// a later command sweeps.
    fn unmake(&self) {
        let store_dir = self.layout.store_dir(&self.root);
        let _sled_let_go = sled_let_go(&store_dir.join("db"));
        let dir = self.layout.thread_dir(&self.root);
        let trash = self.layout.trash_path(&self.root);
        match std::fs::rename(&dir, &trash) {
            Ok(()) => remove_trash(&trash),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                thread = %self.root,
                error = %e,
                "a thread whose making was stopped could not be removed: it is no thread (not \
                 listed), and pruning the store removes it"
            ),
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        // Handed over: the thread is held, nothing to undo.
        let Some(lock) = self.lock.take() else {
            return;
        };
        // The only handle on the store (it is served only once held): closed here.
        drop(self.store.take());
        if self.making {
            self.unmake();
        }
        // Last: until now no other writer could take the thread.
        drop(lock);
    }
}

/// Waits (at most [`SLED_PATIENCE`]) until nobody has the store's `db` file locked (sled's
/// last writes of a store just closed, or a reader copying it), and keeps it locked while the
/// lock is returned. `None` when there is no such file, or the wait ran out.
fn sled_let_go(db: &Path) -> Option<FileLock> {
    let deadline = Instant::now() + SLED_PATIENCE;
    loop {
        let file = std::fs::File::open(db).ok()?;
        match FileLock::try_take(file, true) {
            Ok(Some(lock)) => return Some(lock),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => return None,
        }
    }
}

/// Checks the thread is there (or not) as `how` asks; returns its newest checkpoint.
pub(super) async fn check_presence(
    root: &str,
    store: &SledCheckpointer,
    how: Take,
) -> Result<Option<Flushed>, CheckpointError> {
    let newest = store.get_checkpoint(root, None).await?.map(|r| Flushed {
        checkpoint: r.id,
        step: r.step,
    });
    match how {
        Take::Existing if newest.is_none() => Err(CheckpointError::ThreadNotFound {
            thread: root.to_string(),
        }),
        Take::New if newest.is_some() => Err(CheckpointError::ThreadExists {
            thread: root.to_string(),
        }),
        // Its store exists (the lock was taken with it there): with or without a checkpoint.
        _ => Ok(newest),
    }
}
