//! The backends under test, behind the two things the suite needs from each: the store itself
//! and a way to damage one stored checkpoint. Plus `Recorder`, a pass-through store that logs
//! every call, to check *when* the runtime writes and flushes whatever the backend.

use async_trait::async_trait;
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, MemoryCheckpointer,
    PendingKind, PendingWrite, SledCheckpointer,
};
use std::sync::{Arc, Mutex};

/// One storage backend, fresh and empty for each check.
pub trait Backend: Send + Sync {
    /// The store, as a graph takes it.
    fn saver(&self) -> Arc<dyn Checkpointer>;

    /// Rewrites the stored bytes of one checkpoint (the backend's `tamper` test hook).
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>));

    /// Rewrites every stored piece of a thread's large snapshots.
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>));

    /// Bytes the thread's checkpoints and snapshot pieces occupy in the store.
    fn stored_bytes(&self, thread: &str) -> u64;
}

/// `MemoryCheckpointer`.
pub struct Memory(Arc<MemoryCheckpointer>);

impl Memory {
    pub fn new() -> Self {
        Memory(Arc::new(MemoryCheckpointer::new()))
    }
}

impl Backend for Memory {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.0.clone()
    }

    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.0.tamper(thread, checkpoint, damage);
    }

    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.0.tamper_pieces(thread, damage);
    }

    fn stored_bytes(&self, thread: &str) -> u64 {
        self.0.stored_bytes(thread)
    }
}

/// `SledCheckpointer` in a temporary directory.
pub struct Sled {
    // Declared before the directory so the store closes before the directory is removed.
    saver: Arc<SledCheckpointer>,
    _dir: tempfile::TempDir,
}

impl Sled {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let saver = Arc::new(SledCheckpointer::open(dir.path().join("store")).unwrap());
        Sled { saver, _dir: dir }
    }
}

impl Backend for Sled {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }

    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.saver.tamper(thread, checkpoint, damage).unwrap();
    }

    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.saver.tamper_pieces(thread, damage).unwrap();
    }

    fn stored_bytes(&self, thread: &str) -> u64 {
        self.saver.stored_bytes(thread).unwrap()
    }
}

/// A call the runtime made on the store.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    PutCheckpoint {
        id: CheckpointId,
        parent: Option<CheckpointId>,
        step: u64,
        flush: bool,
    },
    PutWrites {
        checkpoint: CheckpointId,
        /// "update", "error", "interrupt" or "resume", one per write.
        kinds: Vec<&'static str>,
        flush: bool,
    },
    Flush,
}

/// Passes every call through to a backend and logs the writes, in call order.
pub struct Recorder {
    inner: Arc<dyn Checkpointer>,
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    pub fn over(backend: &dyn Backend) -> Arc<Recorder> {
        Arc::new(Recorder {
            inner: backend.saver(),
            ops: Mutex::new(Vec::new()),
        })
    }

    /// The log so far, emptying it.
    pub fn take(&self) -> Vec<Op> {
        std::mem::take(&mut *self.ops.lock().unwrap())
    }

    fn log(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }
}

fn kind(w: &PendingWrite) -> &'static str {
    match w.kind {
        PendingKind::Update { .. } => "update",
        PendingKind::Error { .. } => "error",
        PendingKind::Interrupt(_) => "interrupt",
        PendingKind::Resume { .. } => "resume",
    }
}

#[async_trait]
impl Checkpointer for Recorder {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner.put_checkpoint(record, flush).await?;
        self.log(Op::PutCheckpoint {
            id: record.id,
            parent: record.parent_id,
            step: record.step,
            flush,
        });
        Ok(())
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        self.inner.get_checkpoint(thread, id).await
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.inner.list_checkpoints(thread, before, limit).await
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner
            .put_writes(thread, checkpoint, writes, flush)
            .await?;
        self.log(Op::PutWrites {
            checkpoint,
            kinds: writes.iter().map(kind).collect(),
            flush,
        });
        Ok(())
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.inner.get_writes(thread, checkpoint).await
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.inner.get_journal(thread, key).await
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.inner.put_journal(thread, key, value).await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.list_threads().await
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.inner.delete_checkpoints(thread, ids).await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        self.inner.get_lease(thread).await
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.inner.swap_lease(thread, expected, new).await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.inner.flush().await?;
        self.log(Op::Flush);
        Ok(())
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        self.inner.snapshot_cost(state_bytes)
    }
}
