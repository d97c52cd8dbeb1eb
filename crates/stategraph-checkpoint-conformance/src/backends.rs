//! What the kit needs of a backend under test: the store itself, a way to damage what it stored
//! (so the checks can prove damage is reported, never read as an older or empty state), and
//! what it occupies. To check *when* the runtime writes and flushes whatever the backend, a check
//! wraps the store in [`FaultyStore`](crate::faulty_store::FaultyStore), which logs every write.

use stategraph::checkpoint::{CheckpointId, Checkpointer, MemoryCheckpointer};

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

impl Default for Memory {
    fn default() -> Self {
        Self::new()
    }
}

impl Memory {
    /// A fresh, empty memory store.
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
