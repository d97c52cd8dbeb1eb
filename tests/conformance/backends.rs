//! The backends under test, behind the two things the suite needs from each: the store itself
//! and a way to damage one stored checkpoint. To check *when* the runtime writes and flushes
//! whatever the backend, a check wraps the store in `FaultyStore` (tests/support), which logs
//! every write.

use stategraph::checkpoint::{CheckpointId, Checkpointer, MemoryCheckpointer};

use stategraph_sled::SledCheckpointer;
use std::sync::Arc;

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
