//! A store for tests of what the runtime writes and of how it survives a store that fails:
//! [`FaultyStore`] passes every call through to a real [`Checkpointer`], logs each write that
//! succeeded (as an [`Op`], in call order), tells a watcher about it at once if asked, and fails
//! the writes a [`Fault`] names, the way a dying disk or a kill before the save would.
//!
//! ```ignore
//! use stategraph_checkpoint_conformance::faulty_store::{Fault, FaultyStore, Op};
//!
//! let store = Arc::new(FaultyStore::over(Arc::new(MemoryCheckpointer::new())));
//! // The first save after the model's summary was journaled fails.
//! store.inject(Fault::next_save("disk gone").after(|op| op.is_journal_key("/summary")));
//! let graph = graph.with_checkpointer(store.clone());
//! // ... run, then read what was written and what was refused:
//! assert_eq!(store.failures(), 1);
//! let ops = store.take();
//! ```
//!
//! Only writes are logged or failed; reads, deletes and leases pass straight through (the
//! checkpoints `list_checkpoints` returns are counted: [`FaultyStore::listed`]).

use async_trait::async_trait;
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, CheckpointerLayer, PendingKind,
    PendingWrite,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A write the runtime made on the store.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    PutCheckpoint {
        /// The thread, `{root}/{namespace}` for a subgraph's checkpoint.
        thread: String,
        id: CheckpointId,
        parent: Option<CheckpointId>,
        step: u64,
        flush: bool,
    },
    PutWrites {
        thread: String,
        checkpoint: CheckpointId,
        /// "update", "error", "interrupt" or "resume", one per write.
        kinds: Vec<&'static str>,
        flush: bool,
    },
    PutJournal {
        thread: String,
        key: String,
    },
    Flush,
}

impl Op {
    /// True for a journal entry whose key ends with `suffix` (`"/summary"`).
    pub fn is_journal_key(&self, suffix: &str) -> bool {
        matches!(self, Op::PutJournal { key, .. } if key.ends_with(suffix))
    }
}

type Matcher = Box<dyn Fn(&Op) -> bool + Send + Sync>;

/// One injected failure: the first write that `hits` matches fails with a storage error saying
/// `why`, and is not passed on. With [`Fault::after`], the fault waits until a write matching
/// its trigger has succeeded. A fault fires once.
pub struct Fault {
    why: String,
    hits: Matcher,
    after: Option<Matcher>,
}

impl Fault {
    /// Fails the next checkpoint save.
    pub fn next_checkpoint(why: &str) -> Fault {
        Fault::next(why, |op| matches!(op, Op::PutCheckpoint { .. }))
    }

    /// Fails the next save of a step: its checkpoint or its tasks' results, whichever comes
    /// first.
    pub fn next_save(why: &str) -> Fault {
        Fault::next(why, |op| {
            matches!(op, Op::PutCheckpoint { .. } | Op::PutWrites { .. })
        })
    }

    /// Fails the next write that `hits` matches.
    pub fn next(why: &str, hits: impl Fn(&Op) -> bool + Send + Sync + 'static) -> Fault {
        Fault {
            why: why.to_string(),
            hits: Box::new(hits),
            after: None,
        }
    }

    /// Arms the fault only once a write matching `trigger` has succeeded.
    pub fn after(mut self, trigger: impl Fn(&Op) -> bool + Send + Sync + 'static) -> Fault {
        self.after = Some(Box::new(trigger));
        self
    }
}

type Watcher = Box<dyn Fn(&Op) + Send + Sync>;

/// Passes every call through to `inner`, logging the writes and failing the injected ones.
pub struct FaultyStore {
    inner: Arc<dyn Checkpointer>,
    ops: Mutex<Vec<Op>>,
    faults: Mutex<Vec<Fault>>,
    failures: AtomicUsize,
    listed: AtomicUsize,
    watcher: Option<Watcher>,
}

impl FaultyStore {
    /// A store that passes everything through to `inner` until a fault is injected.
    pub fn over(inner: Arc<dyn Checkpointer>) -> FaultyStore {
        FaultyStore {
            inner,
            ops: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            failures: AtomicUsize::new(0),
            listed: AtomicUsize::new(0),
            watcher: None,
        }
    }

    /// Calls `watch` with every write as soon as the store it wraps has taken it (a flushed
    /// checkpoint is on disk by then): the evidence a crash test logs before a kill can land.
    pub fn watching(mut self, watch: impl Fn(&Op) + Send + Sync + 'static) -> FaultyStore {
        self.watcher = Some(Box::new(watch));
        self
    }

    /// How many checkpoints `list_checkpoints` has returned so far (what a reader read).
    pub fn listed(&self) -> usize {
        self.listed.load(Ordering::SeqCst)
    }

    /// Adds a fault; it fires at most once.
    pub fn inject(&self, fault: Fault) {
        self.faults.lock().unwrap().push(fault);
    }

    /// How many writes the injected faults failed so far.
    pub fn failures(&self) -> usize {
        self.failures.load(Ordering::SeqCst)
    }

    /// The writes that succeeded so far, in call order, emptying the log.
    pub fn take(&self) -> Vec<Op> {
        std::mem::take(&mut *self.ops.lock().unwrap())
    }

    /// Fails `op` if an armed fault hits it (using the fault up).
    fn check(&self, op: &Op) -> Result<(), CheckpointError> {
        let mut faults = self.faults.lock().unwrap();
        let Some(at) = faults
            .iter()
            .position(|f| f.after.is_none() && (f.hits)(op))
        else {
            return Ok(());
        };
        let fault = faults.remove(at);
        self.failures.fetch_add(1, Ordering::SeqCst);
        Err(CheckpointError::Storage(fault.why))
    }

    /// Logs a write that succeeded and arms the faults it triggers.
    fn done(&self, op: Op) {
        for fault in self.faults.lock().unwrap().iter_mut() {
            if fault.after.as_ref().is_some_and(|trigger| trigger(&op)) {
                fault.after = None;
            }
        }
        if let Some(watch) = &self.watcher {
            watch(&op);
        }
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

// Only writes are logged or failed (and lists counted); every other call, and any method added
// to the contract later, goes to `inner` unchanged.
#[async_trait]
impl CheckpointerLayer for FaultyStore {
    fn inner(&self) -> &dyn Checkpointer {
        self.inner.as_ref()
    }

    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        let op = Op::PutCheckpoint {
            thread: record.thread_id.clone(),
            id: record.id,
            parent: record.parent_id,
            step: record.step,
            flush,
        };
        self.check(&op)?;
        self.inner.put_checkpoint(record, flush).await?;
        self.done(op);
        Ok(())
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let page = self.inner.list_checkpoints(thread, before, limit).await?;
        self.listed.fetch_add(page.len(), Ordering::SeqCst);
        Ok(page)
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        let op = Op::PutWrites {
            thread: thread.to_string(),
            checkpoint,
            kinds: writes.iter().map(kind).collect(),
            flush,
        };
        self.check(&op)?;
        self.inner
            .put_writes(thread, checkpoint, writes, flush)
            .await?;
        self.done(op);
        Ok(())
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        let op = Op::PutJournal {
            thread: thread.to_string(),
            key: key.to_string(),
        };
        self.check(&op)?;
        self.inner.put_journal(thread, key, value).await?;
        self.done(op);
        Ok(())
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        self.check(&Op::Flush)?;
        self.inner.flush().await?;
        self.done(Op::Flush);
        Ok(())
    }
}
