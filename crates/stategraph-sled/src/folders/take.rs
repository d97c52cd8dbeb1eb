//! Taking a thread for this process (lock, verify, serve); where reads of a thread go. Opening
//! its store, and undoing a take dropped on the way, is `opening.rs`; letting it go is
//! `letting.rs`.

use super::blobs::damaged_blob;
use super::held_copy::process_stopped;
use super::index::{IndexEntry, ThreadListing};
use super::layout::flushed_beside;
use super::layout::{fingerprint, io_error, lock_holder, FileLock};
use super::opening::check_presence;
use super::owner::{self, OwnerServer, Request, Response};
use super::read_copy::{open_copy, Copied, ReadCopy};
use super::unwritten::remove_trash;
use super::waiting::{blocking, Waiting};
use super::{
    wait_for_sole, Damage, FolderCheckpointer, Held, Slot, Source, Take, READ_PATIENCE, RETRY,
    WRITE_PATIENCE,
};
use crate::sled_store::read_flushed;
use crate::SledCheckpointer;
use stategraph_checkpoint::root_thread;
use stategraph_checkpoint::{validate_thread_id, CheckpointError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a writer looks again at a thread this process is closing: a closing is a flush
/// and a few small files, milliseconds.
const CLOSING_POLL: Duration = Duration::from_millis(2);

impl FolderCheckpointer {
    /// Takes a thread for this process (see [`Take`]) and returns its store.
    pub(super) async fn take(
        &self,
        thread: &str,
        how: Take,
    ) -> Result<Arc<SledCheckpointer>, CheckpointError> {
        validate_thread_id(root_thread(thread))?;
        let root = root_thread(thread);
        self.refuse_single_store()?;
        if root.starts_with('.') {
            return Err(CheckpointError::InvalidThreadId {
                thread: root.to_string(),
                reason: "it starts with a dot (reserved for the store's own files)",
            });
        }
        match self.slot(root) {
            Some(Slot::Held(held)) => {
                if matches!(how, Take::Existing | Take::New) {
                    check_presence(root, &held.store, how).await?;
                }
                return Ok(held.store.clone());
            }
            // Read through its holder before: the lock says whether that holder still has it,
            // and one holding it between runs is waited for (`lock_thread`).
            Some(Slot::Remote(_)) | Some(Slot::Copy(_)) => {
                self.take_slot(root);
            }
            None => {}
        }
        // No await between the lock taken and `open_held` guarding it (`opening.rs`): a take
        // dropped from here on is undone.
        let lock = self.lock_thread(root, how).await?;
        let held = self.open_held(root, lock, how).await?;
        let store = held.store.clone();
        self.set_slot(root, Slot::Held(held));
        Ok(store)
    }

    /// A single store (written by `SledCheckpointer::open`) is read here, never written: it has
    /// no folders to lock, and the program that writes it may open it at any moment.
    pub(super) fn refuse_single_store(&self) -> Result<(), CheckpointError> {
        if !self.layout.is_single_store() {
            return Ok(());
        }
        Err(CheckpointError::Storage(format!(
            "{} is a single sled store of many threads (as SledCheckpointer::open writes it): \
             its threads can be listed and read here, not written. For threads that more than \
             one program writes, have each of them store the threads with \
             FolderCheckpointer::open",
            self.layout.root().display()
        )))
    }

    /// Takes the thread's lock, creating its folder when `how` allows.
    pub(super) async fn lock_thread(
        &self,
        root: &str,
        how: Take,
    ) -> Result<FileLock, CheckpointError> {
        let dir = self.layout.thread_dir(root);
        let lock_path = self.layout.lock_path(root);
        let deadline = Instant::now() + WRITE_PATIENCE;
        let mut waiting = Waiting::default();
        loop {
            let stored = matches!(how, Take::Existing | Take::Stored);
            if stored && !self.layout.store_dir(root).is_dir() {
                return Err(CheckpointError::ThreadNotFound {
                    thread: root.to_string(),
                });
            }
            if !stored {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| io_error("cannot create the thread's folder", &dir, e))?;
            }
            let file = match std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
            {
                Ok(f) => f,
                // The folder went away (deleted) between the check and the open.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("cannot open", &lock_path, e)),
            };
            match FileLock::try_take(file, true)
                .map_err(|e| io_error("cannot lock", &lock_path, e))?
            {
                Some(lock) if lock.still_at(&lock_path) => return Ok(lock),
                // Renamed away (deleted) while we opened it: look again.
                Some(_) => continue,
                None if self.closings.is_closing(root) && Instant::now() < deadline => {
                    // This process is letting it go (or undoing a take of it): its own lock.
                    waiting.say(root, "this process is closing it");
                    tokio::time::sleep(CLOSING_POLL).await;
                }
                None => {
                    if let Ok(socket) = owner::socket_path(&dir) {
                        if owner::ping(&socket).await {
                            // A holder running the thread (its lease live) keeps it for the
                            // run: refused at once. One holding it between runs (a server's new
                            // thread before its first run, a thread being let go, an edit being
                            // saved) lets go within moments: waited for, as below.
                            if Instant::now() >= deadline || !holds_idle(&socket, root).await {
                                return Err(self.busy(root, Some(&socket)).await);
                            }
                            waiting.say(root, "another process holds it between runs");
                            tokio::time::sleep(RETRY).await;
                            continue;
                        }
                    }
                    // A stopped holder lets go only once it goes on: waiting is no use.
                    if Instant::now() >= deadline || self.holder_stopped(root) {
                        return Err(self.busy(root, None).await);
                    }
                    waiting.say(root, "another process holds it without serving it");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    /// A held thread, served to other processes (when there is a tokio runtime to serve from).
    pub(super) fn held_from(
        &self,
        root: &str,
        lock: FileLock,
        store: Arc<SledCheckpointer>,
    ) -> Arc<Held> {
        let server = if tokio::runtime::Handle::try_current().is_ok() {
            let created = store.first_checkpoint_time(root).ok().flatten();
            match OwnerServer::start(
                &self.layout.thread_dir(root),
                root.to_string(),
                created,
                &store,
            ) {
                Ok(server) => Some(server),
                Err(e) => {
                    tracing::warn!(thread = %root, error = %e, "cannot serve reads of this thread to other processes");
                    None
                }
            }
        } else {
            None
        };
        Arc::new(Held {
            store,
            lock,
            server,
        })
    }

    /// Before a store is opened for writing (sled's recovery would make any damage permanent):
    /// checks that its blob files are whole (see `blobs.rs`), and when it changed since its
    /// index was written, on a copy, that it still holds the checkpoint its index last saw.
    pub(super) async fn verify_before_writing(
        &self,
        root: &str,
        store_dir: &Path,
    ) -> Result<(), CheckpointError> {
        let entry = IndexEntry::read(&self.layout.index_path(root));
        let unchanged = |entry: &IndexEntry| {
            fingerprint(store_dir).as_deref() == Some(entry.fingerprint.as_str())
        };
        // A thread whose last run was killed has no index that matches, but its flush witness
        // says what its store held: checked on a copy like a changed store's.
        let flushed = flushed_beside(store_dir).and_then(|f| read_flushed(&f, root));
        let entry = match entry {
            Some(entry) if !unchanged(&entry) => Some(entry),
            None if flushed.is_some() => None,
            // No index (or one that still matches, which a flipped bit does not change): the
            // copy below is not made, so the blobs are checked here, in the store itself.
            unindexed_or_unchanged => {
                let blobs = unindexed_or_unchanged.map(|e| e.blobs).unwrap_or_default();
                // Reads every blob file: off the async threads.
                let (dir, options) = (store_dir.to_path_buf(), self.options);
                let damaged = blocking(move || Ok(damaged_blob(&dir, &dir, &blobs, options)));
                return match damaged.await? {
                    Some(d) => Err(CheckpointError::Damaged {
                        thread: root.to_string(),
                        file: d.file,
                        reason: d.reason,
                    }),
                    None => Ok(()),
                };
            }
        };
        let blobs = entry
            .as_ref()
            .map(|e| e.blobs.as_slice())
            .unwrap_or_default();
        let copied = {
            let (dir, root, options) = (store_dir.to_path_buf(), root.to_string(), self.options);
            let blobs = blobs.to_vec();
            blocking(move || open_copy(&dir, &root, options, &blobs)).await?
        };
        match copied {
            Copied::Open(copy) => {
                let witness = entry.as_ref().map(|e| &e.listing);
                let listing = ThreadListing::of_store(&copy, root, witness, store_dir).await?;
                match listing.and_then(|l| l.damage).or(copy.damage.clone()) {
                    Some(d) => Err(CheckpointError::Damaged {
                        thread: root.to_string(),
                        file: d.file,
                        reason: d.reason,
                    }),
                    None => Ok(()),
                }
            }
            Copied::Missing | Copied::Busy => Ok(()),
        }
    }

    /// The error for a thread another process holds, with what that process says of itself.
    pub(super) async fn busy(&self, root: &str, socket: Option<&Path>) -> CheckpointError {
        let lease = match socket {
            Some(socket) => match owner::request(
                socket,
                &Request::GetLease {
                    thread: root.to_string(),
                },
            )
            .await
            {
                Ok(Response::Lease(lease)) => lease,
                _ => None,
            },
            None => None,
        };
        // Without a lease (no run holds it, or its holder serves nobody), the lock says who.
        let pid = match &lease {
            Some(lease) => lease.pid,
            None => lock_holder(&self.layout.lock_path(root)).unwrap_or(0),
        };
        if lease.is_none() && pid != 0 && process_stopped(pid) {
            return CheckpointError::HolderStopped {
                thread: root.to_string(),
                pid,
            };
        }
        CheckpointError::ThreadBusy {
            thread: root.to_string(),
            pid,
            host: lease
                .as_ref()
                .map(|l| l.host.clone())
                .unwrap_or_else(|| "this host".to_string()),
            expires_in_ms: lease
                .map(|l| {
                    l.expires_at_ms
                        .saturating_sub(stategraph_checkpoint::now_ms())
                })
                .unwrap_or(0),
        }
    }

    /// True when the process holding `root`'s lock is stopped (Ctrl+Z, SIGSTOP).
    fn holder_stopped(&self, root: &str) -> bool {
        lock_holder(&self.layout.lock_path(root)).is_some_and(process_stopped)
    }

    /// Where reads of `thread` go; `None` when it has no store.
    pub(super) async fn source(&self, thread: &str) -> Result<Option<Source>, CheckpointError> {
        // One store holds every thread of a single store: one copy serves them all.
        let root = match self.layout.is_single_store() {
            true => "",
            false => root_thread(thread),
        };
        let store_dir = self.layout.store_dir(root);
        match self.slot(root) {
            Some(Slot::Held(h)) => return Ok(Some(Source::Local(h.store.clone()))),
            // A copy serves while its store is as it was copied; one that a writer (another
            // process: `graph resume` beside a long-lived reader) changed since is taken again.
            Some(Slot::Copy(c)) if c.is_current(&store_dir) => return Ok(Some(Source::Copy(c))),
            // A holder serves reads while it holds the thread; letting go removes its socket.
            Some(Slot::Remote(s)) if s.exists() => return Ok(Some(Source::Remote(s))),
            _ => {}
        }
        if !self.layout.is_single_store()
            && (validate_thread_id(root).is_err() || root.starts_with('.'))
        {
            return Ok(None);
        }
        let blobs = match self.layout.is_single_store() {
            true => Vec::new(),
            false => IndexEntry::read(&self.layout.index_path(root))
                .map(|e| e.blobs)
                .unwrap_or_default(),
        };
        let deadline = Instant::now() + READ_PATIENCE;
        let mut waiting = Waiting::default();
        loop {
            // Copying and opening a store reads and writes files: off the async threads.
            let copied = {
                let (dir, root, options, blobs) = (
                    store_dir.clone(),
                    root.to_string(),
                    self.options,
                    blobs.clone(),
                );
                blocking(move || open_copy(&dir, &root, options, &blobs)).await?
            };
            match copied {
                Copied::Missing => {
                    self.keep_for_reads(root, None);
                    return Ok(None);
                }
                Copied::Open(mut copy) => {
                    if (copy.damage.is_none() || copy.blob_damaged)
                        && !self.layout.is_single_store()
                    {
                        let lost = self.lost_since_indexed(root, &copy, &store_dir).await?;
                        copy.damage = match (copy.damage.take(), lost) {
                            // sled read the log only up to the damaged blob: when that lost the
                            // checkpoint the index saw last, "the newest" is not known either.
                            (Some(blob), Some(lost)) => Some(Damage {
                                lost_checkpoints: lost.lost_checkpoints,
                                ..blob
                            }),
                            (blob, lost) => blob.or(lost),
                        };
                    }
                    let copy: Arc<ReadCopy> = Arc::from(copy);
                    self.keep_for_reads(root, Some(Slot::Copy(copy.clone())));
                    return Ok(Some(Source::Copy(copy)));
                }
                Copied::Busy => {
                    if let Ok(socket) = owner::socket_path(&self.layout.thread_dir(root)) {
                        if owner::ping(&socket).await {
                            self.keep_for_reads(root, Some(Slot::Remote(socket.clone())));
                            return Ok(Some(Source::Remote(socket)));
                        }
                    }
                    if Instant::now() >= deadline && self.layout.is_single_store() {
                        return Err(CheckpointError::Locked {
                            path: store_dir.display().to_string(),
                        });
                    }
                    // Its holder does not answer (it serves nobody, or it is stopped: Ctrl+Z, at
                    // once): read what it flushed, possibly behind (`held_copy.rs`); a copy that
                    // does not read cleanly is named as a writer refused would name it.
                    if Instant::now() >= deadline || self.holder_stopped(root) {
                        if let Some(copy) = self.copy_of_held(root, &blobs).await? {
                            let copy: Arc<ReadCopy> = Arc::from(copy);
                            self.keep_for_reads(root, Some(Slot::Copy(copy.clone())));
                            return Ok(Some(Source::Copy(copy)));
                        }
                        return Err(self.busy(root, None).await);
                    }
                    waiting.say(
                        root,
                        "another process has its store open without serving it",
                    );
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    /// Keeps `slot` (a copy, or the holder's socket) for the next reads of `root`, or forgets
    /// the one kept (`None`), unless this process took the thread meanwhile. A copy replaced or
    /// forgotten is removed when the last read of it ends (its directory goes with it).
    fn keep_for_reads(&self, root: &str, slot: Option<Slot>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(slots.get(root), Some(Slot::Held(_))) {
            return;
        }
        match slot {
            Some(slot) => slots.insert(root.to_string(), slot),
            None => slots.remove(root),
        };
    }

    /// The damage of a copied store that no longer holds what its index saw, or nothing at all.
    pub(super) async fn lost_since_indexed(
        &self,
        root: &str,
        copy: &ReadCopy,
        store_dir: &Path,
    ) -> Result<Option<Damage>, CheckpointError> {
        let entry = IndexEntry::read(&self.layout.index_path(root));
        Ok(
            ThreadListing::of_store(copy, root, entry.as_ref().map(|e| &e.listing), store_dir)
                .await?
                .and_then(|l| l.damage),
        )
    }

    pub(super) async fn remote(
        &self,
        socket: &Path,
        request: Request,
    ) -> Result<Response, CheckpointError> {
        match owner::request(socket, &request).await {
            Ok(Response::Error(message)) => Err(CheckpointError::Storage(message)),
            Ok(response) => Ok(response),
            Err(e) => Err(CheckpointError::Storage(format!(
                "the process holding this thread did not answer on {}: {e}",
                socket.display()
            ))),
        }
    }

    /// Deletes a root thread's folder. The store is not opened (a damaged one can go too); the
    /// thread's lock keeps writers out and an exclusive lock on `store/db` waits for readers
    /// copying it.
    pub(super) async fn delete_folder(&self, root: &str) -> Result<(), CheckpointError> {
        validate_thread_id(root)?;
        self.refuse_single_store()?;
        let held = match self.take_slot(root) {
            Some(Slot::Held(held)) => Some(held),
            Some(Slot::Remote(socket)) => return Err(self.busy(root, Some(&socket)).await),
            _ => None,
        };
        let lock = match &held {
            Some(_) => None,
            None => Some(self.lock_thread(root, Take::Existing).await?),
        };
        let _readers_done = match held {
            Some(_) => None,
            None => self.exclude_readers(root).await?,
        };
        let trash = self.trash_folder(root);
        if let Some(held) = held {
            drop(Arc::try_unwrap(wait_for_sole(held)).ok());
        }
        drop(lock);
        remove_trash(&trash?);
        Ok(())
    }

    /// Renames the folder of a thread whose lock is held (readers kept out) to a dot-folder,
    /// and returns where. Renamed while held, so the thread vanishes at once and whole: a reader
    /// or writer waiting for it finds no folder, and a deletion cut short leaves only a
    /// dot-folder that the next command removes.
    pub(super) fn trash_folder(&self, root: &str) -> Result<PathBuf, CheckpointError> {
        let dir = self.layout.thread_dir(root);
        let trash = self.layout.trash_path(root);
        std::fs::rename(&dir, &trash)
            .map_err(|e| io_error("cannot delete the thread's folder", &dir, e))?;
        Ok(trash)
    }

    /// Waits until no reader is copying the thread's store, and keeps new ones out.
    pub(super) async fn exclude_readers(
        &self,
        root: &str,
    ) -> Result<Option<FileLock>, CheckpointError> {
        let db_file = self.layout.store_dir(root).join("db");
        let deadline = Instant::now() + WRITE_PATIENCE;
        let mut waiting = Waiting::default();
        loop {
            let file = match std::fs::File::open(&db_file) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error("cannot open", &db_file, e)),
            };
            match FileLock::try_take(file, true)
                .map_err(|e| io_error("cannot lock", &db_file, e))?
            {
                Some(lock) => return Ok(Some(lock)),
                None if Instant::now() >= deadline => {
                    return Err(CheckpointError::Locked {
                        path: db_file.display().to_string(),
                    })
                }
                None => {
                    waiting.say(root, "a reader is copying its store");
                    tokio::time::sleep(RETRY).await
                }
            }
        }
    }

    pub(super) async fn writable(
        &self,
        thread: &str,
    ) -> Result<Arc<SledCheckpointer>, CheckpointError> {
        self.take(thread, Take::Any).await
    }
}

/// True when the process answering on `socket` holds `root` without running it (no live lease):
/// it lets go within moments, so a writer waits for it rather than refusing at once.
async fn holds_idle(socket: &Path, root: &str) -> bool {
    let request = Request::GetLease {
        thread: root.to_string(),
    };
    match owner::request(socket, &request).await {
        Ok(Response::Lease(lease)) => {
            lease.is_none_or(|l| l.expires_at_ms <= stategraph_checkpoint::now_ms())
        }
        _ => false,
    }
}
