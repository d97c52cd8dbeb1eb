//! The CLI's store: one small sled store per thread, an index of `meta.json` files, and reads
//! of running threads through their owner's socket.
//!
//! Layout under the database directory (`--db`):
//!
//! ```text
//! threads/<thread-id>/store/      the thread's sled store (only one process may open it)
//! threads/<thread-id>/meta.json   graph, graph file, status, step, times (replaced atomically)
//! threads/<thread-id>/owner.sock  while a run holds the thread: answers read requests
//! ```
//!
//! Why one store per thread: sled lets one process open a store, and a second terminal must be
//! able to list threads, read a running thread and run other threads meanwhile. With a store
//! per thread, a run locks only its own thread; `graph threads` reads only the meta files; and a
//! read of a running thread is answered by the process that holds it (see `owner.rs`).

use super::owner::{self, Request, Response};
use crate::checkpoint::{
    now_ms, CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, PendingWrite,
    SledCheckpointer, SledOptions,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a thread stands, as the index records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Running,
    Paused,
    Done,
    Failed,
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Stopped => "stopped",
        })
    }
}

/// One thread's entry in the index (`meta.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ThreadMeta {
    pub thread_id: String,
    /// The registered graph.
    pub graph: String,
    /// The graph as given to `run`: a registered name or an absolute file path.
    pub graph_file: String,
    /// `--set` overrides given to `run`, applied again on resume.
    #[serde(default)]
    pub overrides: Vec<String>,
    pub status: Status,
    pub step: u64,
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    /// The process that last ran it.
    #[serde(default)]
    pub pid: Option<u32>,
}

/// Paths of a database directory.
#[derive(Clone, Debug)]
pub(crate) struct Db {
    root: PathBuf,
}

impl Db {
    pub(crate) fn new(root: PathBuf) -> Self {
        Db { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn threads_dir(&self) -> PathBuf {
        self.root.join("threads")
    }

    pub(crate) fn thread_dir(&self, thread: &str) -> PathBuf {
        self.threads_dir().join(thread)
    }

    pub(crate) fn store_dir(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("store")
    }

    pub(crate) fn meta_path(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("meta.json")
    }

    pub(crate) fn socket_path(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("owner.sock")
    }

    /// True when the thread has a store.
    pub(crate) fn exists(&self, thread: &str) -> bool {
        self.store_dir(thread).is_dir()
    }

    pub(crate) fn read_meta(&self, thread: &str) -> Result<Option<ThreadMeta>, String> {
        let path = self.meta_path(thread);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{} is damaged: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Replaces the thread's meta file atomically: readers see the old or the new file, never a
    /// half-written one.
    pub(crate) fn write_meta(&self, meta: &ThreadMeta) -> std::io::Result<()> {
        let path = self.meta_path(&meta.thread_id);
        let tmp = path.with_file_name(format!("meta.json.{}.tmp", std::process::id()));
        let bytes = serde_json::to_vec_pretty(meta).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)
    }

    /// The ids of every thread with a store, in no particular order.
    pub(crate) fn thread_ids(&self) -> std::io::Result<Vec<String>> {
        let dir = self.threads_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // Dot-names are deletions in progress.
            if !name.starts_with('.') && entry.path().join("store").is_dir() {
                ids.push(name);
            }
        }
        Ok(ids)
    }

    /// Whether a live process owns the thread (its socket answers).
    pub(crate) async fn is_running(&self, thread: &str) -> bool {
        owner::ping(&self.socket_path(thread)).await
    }
}

#[derive(Clone)]
enum Slot {
    Local(Arc<SledCheckpointer>),
    /// Another process holds the store; reads go through its socket.
    Remote(PathBuf),
}

/// A [`Checkpointer`] over the per-thread stores of a database directory.
///
/// Each thread's store is opened on first use and kept open. A thread whose store another
/// process holds is read through that process's socket; writing it fails with
/// [`CheckpointError::ThreadBusy`].
pub(crate) struct ThreadStores {
    db: Db,
    // A std mutex: it is never held across an await.
    slots: Mutex<HashMap<String, Slot>>,
}

/// How long a reader waits for a store held by a process that does not serve it (a short
/// command such as `graph state`, which lets go within milliseconds).
const READ_PATIENCE: Duration = Duration::from_secs(3);
/// The same for a writer; a live run is detected at once through its socket.
const WRITE_PATIENCE: Duration = Duration::from_secs(1);

impl ThreadStores {
    pub(crate) fn new(db: Db) -> Self {
        ThreadStores {
            db,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, thread: &str) -> Option<Slot> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread)
            .cloned()
    }

    fn cache(&self, thread: &str, slot: Slot) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(thread.to_string(), slot);
    }

    /// Closes the thread's store if this process has it open.
    pub(crate) fn close(&self, thread: &str) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread);
    }

    /// True when reads of `thread` go to the process that runs it.
    pub(crate) fn is_remote(&self, thread: &str) -> bool {
        matches!(self.cached(thread), Some(Slot::Remote(_)))
    }

    /// Opens the thread's store for this process to write, creating it if needed. Fails with
    /// `ThreadBusy` when a live run holds it.
    pub(crate) async fn open_for_write(
        &self,
        thread: &str,
    ) -> Result<Arc<SledCheckpointer>, CheckpointError> {
        match self.cached(thread) {
            Some(Slot::Local(s)) => return Ok(s),
            Some(Slot::Remote(socket)) => return Err(self.busy(thread, &socket).await),
            None => {}
        }
        let dir = self.db.store_dir(thread);
        std::fs::create_dir_all(&dir).map_err(|e| {
            CheckpointError::Storage(format!(
                "cannot create the thread's store at {}: {e}",
                dir.display()
            ))
        })?;
        let socket = self.db.socket_path(thread);
        let deadline = Instant::now() + WRITE_PATIENCE;
        loop {
            match SledCheckpointer::open_with(&dir, SledOptions::small()) {
                Ok(store) => {
                    let store = Arc::new(store);
                    self.cache(thread, Slot::Local(store.clone()));
                    return Ok(store);
                }
                Err(CheckpointError::Locked { path }) => {
                    if owner::ping(&socket).await {
                        return Err(self.busy(thread, &socket).await);
                    }
                    if Instant::now() >= deadline {
                        return Err(CheckpointError::Locked { path });
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The slot to read `thread` from; `None` when the thread has no store.
    async fn for_read(&self, thread: &str) -> Result<Option<Slot>, CheckpointError> {
        if let Some(slot) = self.cached(thread) {
            return Ok(Some(slot));
        }
        let dir = self.db.store_dir(thread);
        let socket = self.db.socket_path(thread);
        let deadline = Instant::now() + READ_PATIENCE;
        loop {
            // Checked each time: reading a thread that does not exist must not create it.
            if !dir.is_dir() {
                return Ok(None);
            }
            match SledCheckpointer::open_with(&dir, SledOptions::small()) {
                Ok(store) => {
                    let slot = Slot::Local(Arc::new(store));
                    self.cache(thread, slot.clone());
                    return Ok(Some(slot));
                }
                Err(CheckpointError::Locked { path }) => {
                    if owner::ping(&socket).await {
                        let slot = Slot::Remote(socket.clone());
                        self.cache(thread, slot.clone());
                        return Ok(Some(slot));
                    }
                    if Instant::now() >= deadline {
                        return Err(CheckpointError::Locked { path });
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn for_write(&self, thread: &str) -> Result<Arc<SledCheckpointer>, CheckpointError> {
        self.open_for_write(thread).await
    }

    async fn busy(&self, thread: &str, socket: &Path) -> CheckpointError {
        let lease = match owner::request(
            socket,
            &Request::GetLease {
                thread: thread.to_string(),
            },
        )
        .await
        {
            Ok(Response::Lease(lease)) => lease,
            _ => None,
        };
        let pid_from_meta = || {
            self.db
                .read_meta(thread)
                .ok()
                .flatten()
                .and_then(|m| m.pid)
                .unwrap_or(0)
        };
        CheckpointError::ThreadBusy {
            thread: thread.to_string(),
            pid: lease.as_ref().map(|l| l.pid).unwrap_or_else(pid_from_meta),
            host: lease
                .as_ref()
                .map(|l| l.host.clone())
                .unwrap_or_else(|| "this host".to_string()),
            expires_in_ms: lease
                .map(|l| l.expires_at_ms.saturating_sub(now_ms()))
                .unwrap_or(0),
        }
    }

    async fn remote(&self, socket: &Path, request: Request) -> Result<Response, CheckpointError> {
        match owner::request(socket, &request).await {
            Ok(Response::Error(message)) => Err(CheckpointError::Storage(message)),
            Ok(response) => Ok(response),
            Err(e) => Err(CheckpointError::Storage(format!(
                "the process running this thread did not answer on {}: {e}",
                socket.display()
            ))),
        }
    }

    /// Makes everything this process wrote durable.
    pub(crate) async fn flush_all(&self) -> Result<(), CheckpointError> {
        let locals: Vec<Arc<SledCheckpointer>> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(|s| match s {
                Slot::Local(s) => Some(s.clone()),
                Slot::Remote(_) => None,
            })
            .collect();
        for store in locals {
            store.flush().await?;
        }
        Ok(())
    }
}

fn unexpected(response: Response) -> CheckpointError {
    CheckpointError::Storage(format!(
        "the running process answered out of turn: {response:?}"
    ))
}

#[async_trait]
impl Checkpointer for ThreadStores {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.for_write(&record.thread_id)
            .await?
            .put_checkpoint(record, flush)
            .await
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        match self.for_read(thread).await? {
            None => Ok(None),
            Some(Slot::Local(s)) => s.get_checkpoint(thread, id).await,
            Some(Slot::Remote(socket)) => match self
                .remote(
                    &socket,
                    Request::GetCheckpoint {
                        thread: thread.into(),
                        id,
                    },
                )
                .await?
            {
                Response::Checkpoint(r) => Ok(r.map(|b| *b)),
                other => Err(unexpected(other)),
            },
        }
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        match self.for_read(thread).await? {
            None => Ok(Vec::new()),
            Some(Slot::Local(s)) => s.list_checkpoints(thread, before, limit).await,
            Some(Slot::Remote(socket)) => {
                let request = Request::ListCheckpoints {
                    thread: thread.into(),
                    before,
                    limit,
                };
                match self.remote(&socket, request).await? {
                    Response::Checkpoints(r) => Ok(r),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.for_write(thread)
            .await?
            .put_writes(thread, checkpoint, writes, flush)
            .await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        match self.for_read(thread).await? {
            None => Ok(Vec::new()),
            Some(Slot::Local(s)) => s.get_writes(thread, checkpoint).await,
            Some(Slot::Remote(socket)) => match self
                .remote(
                    &socket,
                    Request::GetWrites {
                        thread: thread.into(),
                        checkpoint,
                    },
                )
                .await?
            {
                Response::Writes(w) => Ok(w),
                other => Err(unexpected(other)),
            },
        }
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        match self.for_read(thread).await? {
            None => Ok(None),
            Some(Slot::Local(s)) => s.get_journal(thread, key).await,
            Some(Slot::Remote(socket)) => {
                let request = Request::GetJournal {
                    thread: thread.into(),
                    key: key.into(),
                };
                match self.remote(&socket, request).await? {
                    Response::Journal(v) => Ok(v),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.for_write(thread)
            .await?
            .put_journal(thread, key, value)
            .await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.db.thread_ids().map_err(CheckpointError::storage)
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.for_write(thread).await?.delete_thread(thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.for_write(thread)
            .await?
            .delete_checkpoints(thread, ids)
            .await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        match self.for_read(thread).await? {
            None => Ok(None),
            Some(Slot::Local(s)) => s.get_lease(thread).await,
            Some(Slot::Remote(socket)) => match self
                .remote(
                    &socket,
                    Request::GetLease {
                        thread: thread.into(),
                    },
                )
                .await?
            {
                Response::Lease(l) => Ok(l),
                other => Err(unexpected(other)),
            },
        }
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.for_write(thread)
            .await?
            .swap_lease(thread, expected, new)
            .await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.flush_all().await
    }

    // Every thread's store is a sled store.
    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        SledCheckpointer::shared_snapshot_cost(state_bytes)
    }
}
