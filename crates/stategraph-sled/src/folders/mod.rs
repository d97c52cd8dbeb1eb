//! One sled store per thread, in a folder per thread: the layout the `graph` command uses, and
//! that a program can use as well, so `graph` lists and inspects its threads.
//!
//! Why a store per thread: sled lets one process open a store, and people want to list threads,
//! read a running thread and run other threads from a second terminal. With a store per thread a
//! run locks only its own thread; a thread another process holds is read through that process
//! (see `owner.rs`), and a thread nobody holds is read from a private copy of its store, so a read
//! never writes (see `read_copy.rs`; `temp_copy.rs` makes the copy). The on-disk layout is
//! described in `layout.rs`; the index file that makes listing fast is only a cache of the stores
//! (see `index.rs`; what any of them finds wrong is a `Damage`, `damage.rs`). A thread whose
//! holder does not answer (stopped with Ctrl+Z) is read from a copy of what it flushed, marked
//! as possibly behind (`held_copy.rs`). sled drops a blob file that fails its checksum with all written after it:
//! readers and writers check them before sled opens a store (see `blobs.rs`). A thread folder
//! whose store has not held a record on disk yet is marked new (see `layout.rs`): when its
//! process died first, it is no thread, and `unwritten.rs` removes it once nobody holds it
//! (`graph prune`). Opening a taken thread's store is `opening.rs`, whose guard removes what a
//! take made when the take is dropped before it completes (a stopped command): a take leaves a
//! whole thread, or the thread as it was, or nothing. Letting a thread go (flush, index, close,
//! unlock) is `letting.rs`, at once or on a blocking thread. Taking a thread is `take.rs`;
//! how a take waits (file work on tokio's blocking pool, a wait said once) is `waiting.rs`.
//!
//! A subgraph's checkpoints (thread `{root}/{ns}`) are stored in the root thread's folder, only
//! root threads are listed, and deleting a root thread deletes its folder, children included.

mod blobs;
mod checkpointer;
mod damage;
mod held_copy;
mod index;
mod layout;
mod letting;
mod opening;
mod owner;
mod read_copy;
mod repair;
mod required;
mod take;
mod temp_copy;
mod unwritten;
mod waiting;

pub use damage::Damage;
pub use index::ThreadListing;
pub use repair::RepairReport;
pub use required::{RecordUnreadable, RequiredRecord};

use crate::{SledCheckpointer, SledOptions};
use index::IndexEntry;
use layout::{file_stamp, fingerprint, io_error, FileLock, Layout};
use letting::Closings;
use owner::{OwnerServer, Request, Response};
use read_copy::{open_copy, Copied, ReadCopy};
use required::with_required_checked;
use stategraph_checkpoint::root_thread;
use stategraph_checkpoint::CheckpointError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a reader waits for a store held by a process that does not serve it (a short
/// command such as `graph update`, which lets go within milliseconds).
const READ_PATIENCE: Duration = Duration::from_secs(3);
/// How long a writer waits for a thread held by a process that does not serve it, or for a
/// reader's copy to finish.
const WRITE_PATIENCE: Duration = Duration::from_secs(3);
/// How long a writer waits before retrying a lock.
const RETRY: Duration = Duration::from_millis(25);

/// Checkpoints in a directory, one sled store per thread (see the module's documentation for
/// the layout and who may touch what).
///
/// Writing a thread takes it for this process until [`release`](Self::release) (or
/// [`close`](Self::close), or drop); while it is held, other processes read it through this
/// one, and cannot write it ([`CheckpointError::ThreadBusy`]). Reading a thread nobody holds
/// never changes its files.
///
/// ```no_run
/// # async fn demo() -> Result<(), stategraph_checkpoint::CheckpointError> {
/// use stategraph_sled::FolderCheckpointer;
/// let store = std::sync::Arc::new(FolderCheckpointer::open("./threads-db")?);
/// // graph.with_checkpointer(store.clone()) ... run threads ...
/// for t in store.threads().await? {
///     println!("{} {:?}", t.thread_id, t.summary.map(|s| s.status));
/// }
/// store.close();
/// # Ok(()) }
/// ```
pub struct FolderCheckpointer {
    layout: Layout,
    options: SledOptions,
    /// The journal record its user keeps with every thread, checked by the listing.
    required: Option<RequiredRecord>,
    // A std mutex: never held across an await.
    slots: Mutex<HashMap<String, Slot>>,
    /// Threads let go in the background (`letting.rs`) whose stores are still closing.
    closings: Closings,
}

#[derive(Clone)]
enum Slot {
    /// This process holds the thread.
    Held(Arc<Held>),
    /// Another process holds it; reads go through its socket.
    Remote(PathBuf),
    /// Nobody held it when it was first read here: a private copy.
    Copy(Arc<ReadCopy>),
}

struct Held {
    store: Arc<SledCheckpointer>,
    lock: FileLock,
    server: Option<OwnerServer>,
}

/// How to take a thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Take {
    /// It must exist (hold a checkpoint).
    Existing,
    /// It must not exist (a folder without a checkpoint is taken over).
    New,
    /// Either (a write through the `Checkpointer` trait).
    Any,
    /// Its store must exist, with a checkpoint or only journal records (a thread a server made
    /// and has not run yet): taken to write it, never created.
    Stored,
}

/// Where reads of a thread go.
enum Source {
    Local(Arc<SledCheckpointer>),
    Copy(Arc<ReadCopy>),
    Remote(PathBuf),
}

impl FolderCheckpointer {
    /// A directory of threads (created when the first thread is written). Opening writes
    /// nothing, except that it removes what deletions cut short left behind, and the read
    /// copies of processes killed while they read.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with(root, SledOptions::small())
    }

    /// Like [`open`](Self::open), with the options each thread's sled store is created with.
    pub fn open_with(
        root: impl AsRef<Path>,
        options: SledOptions,
    ) -> Result<Self, CheckpointError> {
        let root = root.as_ref().to_path_buf();
        if root.exists() && !root.is_dir() {
            return Err(CheckpointError::Storage(format!(
                "cannot open the store at {}: it is a file, not a directory",
                root.display()
            )));
        }
        let layout = Layout::new(root);
        layout.sweep_deleted();
        temp_copy::sweep_stale_copies();
        Ok(FolderCheckpointer {
            layout,
            options,
            required: None,
            slots: Mutex::new(HashMap::new()),
            closings: Closings::default(),
        })
    }

    /// Declares the journal record every thread of this store must have readable once it has
    /// one (see [`RequiredRecord`]): a thread whose record is there but does not read is listed
    /// as damaged, and [`required_record`](Self::required_record) reads it.
    pub fn require_record(mut self, record: RequiredRecord) -> Self {
        self.required = Some(record);
        self
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    /// How to keep what still reads of a damaged single sled store (one store of many threads,
    /// as [`SledCheckpointer::open`] writes it), which this type reads but never writes or
    /// repairs; `None` for the per-thread layout, which [`repair`](Self::repair) repairs.
    pub fn single_store_recovery(&self) -> Option<String> {
        self.layout.is_single_store().then(|| {
            format!(
                "{} is a single sled store of many threads, which is read here but never \
                 written or repaired. To keep what still reads, copy the directory aside first \
                 (the copy keeps the damaged file and what follows it), then open the store \
                 with SledCheckpointer::open in the program that writes it: sled drops the \
                 damaged file and everything written after it",
                self.layout.root().display()
            )
        })
    }

    fn slot(&self, root: &str) -> Option<Slot> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(root)
            .cloned()
    }

    fn set_slot(&self, root: &str, slot: Slot) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(root.to_string(), slot);
    }

    fn take_slot(&self, root: &str) -> Option<Slot> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(root)
    }

    /// Creates a thread and holds it for this process. Fails with
    /// [`CheckpointError::ThreadExists`] when it has a checkpoint already (a folder left without
    /// one by a run that died before its first checkpoint is taken over).
    pub async fn create(&self, thread: &str) -> Result<(), CheckpointError> {
        self.take(thread, Take::New).await.map(drop)
    }

    /// Holds an existing thread for this process, to write it. Fails with
    /// [`CheckpointError::ThreadNotFound`] when it has no checkpoint,
    /// [`CheckpointError::ThreadBusy`] when another process holds it, and
    /// [`CheckpointError::Damaged`] when its store lost checkpoints since it was last closed.
    pub async fn hold(&self, thread: &str) -> Result<(), CheckpointError> {
        self.take(thread, Take::Existing).await.map(drop)
    }

    /// Holds a thread whose store exists, with or without a checkpoint (one made with journal
    /// records only, as a server makes a thread before its first run), to write it: what a
    /// program about to read a thread and then write it takes first, so that its reads go to the
    /// store it writes rather than to a private copy. Fails like [`hold`](Self::hold), except
    /// that a store holding no checkpoint is taken.
    ///
    /// ```no_run
    /// # async fn demo(store: stategraph_sled::FolderCheckpointer) -> Result<(), stategraph_checkpoint::CheckpointError> {
    /// store.hold_stored("thread-1").await?;
    /// // ... read the thread, run it ...
    /// store.release("thread-1")?;
    /// # Ok(()) }
    /// ```
    pub async fn hold_stored(&self, thread: &str) -> Result<(), CheckpointError> {
        self.take(thread, Take::Stored).await.map(drop)
    }

    /// Makes the thread's writes durable, closes its store and lets other processes have it.
    /// Its index entry is brought up to date. Does nothing for a thread this process does not
    /// hold.
    pub fn release(&self, thread: &str) -> Result<(), CheckpointError> {
        let root = root_thread(thread);
        match self.take_slot(root) {
            Some(Slot::Held(held)) => self.let_go(root, held),
            Some(other) => {
                self.set_slot(root, other);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Releases every thread this process holds (see [`release`](Self::release)) and forgets
    /// the copies it read. Errors are logged: a thread that could not be flushed keeps what
    /// was flushed before.
    pub fn close(&self) {
        let slots: Vec<(String, Slot)> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (root, slot) in slots {
            if let Slot::Held(held) = slot {
                if let Err(e) = self.let_go(&root, held) {
                    tracing::warn!(thread = %root, error = %e, "could not close the thread's store cleanly");
                }
            }
        }
        self.closings.wait();
    }

    /// True when another process holds the thread now.
    pub async fn is_running(&self, thread: &str) -> bool {
        matches!(self.source(thread).await, Ok(Some(Source::Remote(_))))
    }

    /// What is wrong with the thread's store, when it is damaged but could be read: a damaged
    /// file set aside in the private copy, or checkpoints lost since it was last closed.
    pub async fn damage(&self, thread: &str) -> Result<Option<Damage>, CheckpointError> {
        Ok(match self.source(thread).await? {
            Some(Source::Copy(copy)) => copy.damage.clone(),
            _ => None,
        })
    }

    /// The `meta.json` of a thread written by an earlier version of this layout, which kept the
    /// graph a thread was run with there (as `graph`, `graph_file` and `overrides`): `None`
    /// when there is none, [`CheckpointError::Damaged`] (naming it) when it cannot be read.
    pub fn legacy_meta(&self, thread: &str) -> Result<Option<serde_json::Value>, CheckpointError> {
        required::read_legacy_meta(&self.layout.legacy_meta_path(thread), thread)
    }

    /// The thread's required record (see [`require_record`](Self::require_record)), as
    /// stored in its journal or, from an earlier version of this layout, its `meta.json`:
    /// `Ok(None)` when it has none (or none is required), `Ok(Err(_))` naming the record when
    /// it is there but does not read.
    pub async fn required_record(
        &self,
        thread: &str,
    ) -> Result<Result<Option<serde_json::Value>, RecordUnreadable>, CheckpointError> {
        let Some(required) = &self.required else {
            return Ok(Ok(None));
        };
        let store_dir = self.layout.store_dir(thread);
        let legacy = self.layout.legacy_meta_path(thread);
        required::read_required(required, self, thread, &store_dir, &legacy).await
    }

    /// The ids of the thread's checkpoints, newest first, read from the store's keys alone (no
    /// record is decoded, so a large state costs nothing and a damaged record is still counted):
    /// what a command that removes checkpoints counts before and after, to say what it removed.
    pub async fn checkpoint_ids(
        &self,
        thread: &str,
    ) -> Result<Vec<stategraph_checkpoint::CheckpointId>, CheckpointError> {
        use stategraph_checkpoint::Checkpointer;
        match self.source(thread).await? {
            None => Ok(Vec::new()),
            Some(Source::Local(s)) => s.checkpoint_ids(thread),
            Some(Source::Copy(c)) => c.reads(thread)?.checkpoint_ids(thread),
            Some(Source::Remote(_)) => Ok(self
                .list_checkpoints(thread, None, usize::MAX)
                .await?
                .into_iter()
                .map(|r| r.id)
                .collect()),
        }
    }

    /// Where [`legacy_meta`](Self::legacy_meta) reads a thread's `meta.json`.
    pub fn legacy_meta_path(&self, thread: &str) -> PathBuf {
        self.layout.legacy_meta_path(thread)
    }

    /// The directory of the thread's store, for messages that say where a record of it is.
    pub fn store_path(&self, thread: &str) -> PathBuf {
        self.layout.store_dir(thread)
    }

    /// Every thread with at least one checkpoint (or a damaged store), sorted by id.
    ///
    /// A thread's line comes from its index file while its store is as it was when last let
    /// go; otherwise from its store (a private copy, or the process that holds it). A store
    /// that cannot be read, or lost checkpoints it had, is listed with its damage.
    pub async fn threads(&self) -> Result<Vec<ThreadListing>, CheckpointError> {
        if self.layout.is_single_store() {
            return self.single_store_threads().await;
        }
        let names = self
            .layout
            .thread_names()
            .map_err(|e| io_error("cannot list threads in", &self.layout.threads_dir(), e))?;
        let mut out = Vec::new();
        for name in names {
            if let Some(listing) = self.listing(&name).await? {
                out.push(listing);
            }
        }
        Ok(out)
    }

    async fn listing(&self, thread: &str) -> Result<Option<ThreadListing>, CheckpointError> {
        if let Some(Slot::Held(held)) = self.slot(thread) {
            return ThreadListing::of_held(&held.store, thread, None)
                .await
                .map(|l| Some(l).filter(|l| l.summary.is_some()));
        }
        let store_dir = self.layout.store_dir(thread);
        let Some(print) = fingerprint(&store_dir) else {
            return Ok(None);
        };
        let index = IndexEntry::read(&self.layout.index_path(thread));
        let legacy = self.layout.legacy_meta_path(thread);
        if let Some(entry) = &index {
            let checked = entry.required.as_deref() == self.required.map(|r| r.key);
            if checked && entry.fingerprint == print && entry.legacy_meta == file_stamp(&legacy) {
                return Ok(Some(entry.listing.clone()).filter(|l| l.summary.is_some()));
            }
        }
        let witness = index.as_ref().map(|e| &e.listing);
        let damaged = |file: String, reason: String| ThreadListing {
            thread_id: thread.to_string(),
            summary: witness.and_then(|w| w.summary.clone()),
            created_at_ms: witness.and_then(|w| w.created_at_ms),
            damage: Some(Damage {
                file,
                reason,
                lost_checkpoints: false,
            }),
        };
        let blobs = index
            .as_ref()
            .map(|e| e.blobs.as_slice())
            .unwrap_or_default();
        match open_copy(&store_dir, thread, self.options, blobs) {
            Ok(Copied::Open(copy)) => {
                let mut listing =
                    ThreadListing::of_store(&copy, thread, witness, &store_dir).await?;
                if let (Some(l), Some(d)) = (&mut listing, copy.damage.clone()) {
                    match &l.damage {
                        // A damaged blob is the cause of what the listing finds lost (sled read
                        // the log only up to it): the cause is named, the loss kept.
                        Some(lost) if copy.blob_damaged => {
                            l.damage = Some(Damage {
                                lost_checkpoints: lost.lost_checkpoints,
                                ..d
                            })
                        }
                        // A snapshot file set aside is not: sled rebuilt its page table from
                        // the log, so a loss the listing finds is told first.
                        Some(_) => {}
                        None => l.damage = Some(d),
                    }
                }
                Ok(with_required_checked(
                    self.required.as_ref(),
                    listing,
                    &copy.store,
                    &store_dir,
                    &legacy,
                )
                .await)
            }
            Ok(Copied::Missing) => Ok(None),
            Ok(Copied::Busy) => Ok(Some(self.busy_listing(thread, witness).await)),
            Err(CheckpointError::Damaged { file, reason, .. }) => Ok(Some(damaged(file, reason))),
            Err(e) => Ok(Some(damaged(
                store_dir.display().to_string(),
                e.to_string(),
            ))),
        }
    }

    /// The threads of a single store, read from one copy of it. The store's damage (a blob
    /// file that fails its checksum: see `blobs.rs`) is every thread's: what was written after
    /// the damaged file does not read, and which threads it held cannot be told.
    async fn single_store_threads(&self) -> Result<Vec<ThreadListing>, CheckpointError> {
        let Some(Source::Copy(copy)) = self.source("").await? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for thread in stategraph_checkpoint::Checkpointer::list_threads(&copy.store).await? {
            let store_dir = self.layout.store_dir(&thread);
            let listing = ThreadListing::of_store(&copy, &thread, None, &store_dir).await?;
            let legacy = self.layout.legacy_meta_path(&thread);
            if let Some(mut listing) = with_required_checked(
                self.required.as_ref(),
                listing,
                &copy.store,
                &store_dir,
                &legacy,
            )
            .await
            {
                if let Some(d) = &copy.damage {
                    listing.damage.get_or_insert_with(|| d.clone());
                }
                out.push(listing);
            }
        }
        if let Some(d) = &copy.damage {
            out.extend(copy.lost_threads.iter().map(|thread| ThreadListing {
                thread_id: thread.clone(),
                summary: None,
                created_at_ms: None,
                damage: Some(Damage {
                    reason: format!(
                        "{}; every checkpoint of this thread was in it or written after it",
                        d.reason
                    ),
                    lost_checkpoints: true,
                    ..d.clone()
                }),
            }));
        }
        out.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
        Ok(out)
    }

    /// The line of a thread another process holds: asked of that process, else (a process that
    /// does not serve reads) its last indexed line, as running.
    async fn busy_listing(&self, thread: &str, witness: Option<&ThreadListing>) -> ThreadListing {
        if let Ok(socket) = owner::socket_path(&self.layout.thread_dir(thread)) {
            let request = Request::Listing {
                thread: thread.to_string(),
            };
            // Pinged first: a holder that does not answer (suspended with Ctrl+Z) costs the
            // listing half a second, not a request's full wait (10 s) for each such thread.
            if owner::ping(&socket).await {
                if let Ok(Response::Listing(l)) = owner::request(&socket, &request).await {
                    return *l;
                }
            }
        }
        // What it flushed, as running: better than its last index line (none, for a thread
        // whose first run holds it).
        let blobs = IndexEntry::read(&self.layout.index_path(thread))
            .map(|e| e.blobs)
            .unwrap_or_default();
        if let Ok(Some(copy)) = self.copy_of_held(thread, &blobs).await {
            let store_dir = self.layout.store_dir(thread);
            if let Ok(Some(mut listing)) =
                ThreadListing::of_store(&copy, thread, witness, &store_dir).await
            {
                if let Some(s) = &mut listing.summary {
                    s.status = stategraph_checkpoint::ThreadStatus::Running;
                }
                return listing;
            }
        }
        let mut listing = witness.cloned().unwrap_or(ThreadListing {
            thread_id: thread.to_string(),
            summary: None,
            created_at_ms: None,
            damage: None,
        });
        if let Some(s) = &mut listing.summary {
            s.status = stategraph_checkpoint::ThreadStatus::Running;
        }
        listing
    }
}

impl Drop for FolderCheckpointer {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits (briefly) until `arc` is the only strong reference: a reader's request served from the
/// store may still be answering.
fn wait_for_sole<T>(arc: Arc<T>) -> Arc<T> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Arc::strong_count(&arc) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    arc
}
