//! The sled stores run the checkpointer conformance kit: `SledCheckpointer` every check, the
//! folder-per-thread store the subgraph checks (it has no hooks to damage a stored checkpoint;
//! its damage handling is tested through the `graph` command in stategraph-cli's tests).

use stategraph_checkpoint::{CheckpointId, Checkpointer};
use stategraph_checkpoint_conformance::{conformance_suite, Backend};
use stategraph_sled::{FolderCheckpointer, SledCheckpointer};
use std::sync::Arc;

/// `SledCheckpointer` in a temporary directory.
struct Sled {
    // Declared before the directory so the store closes before the directory is removed.
    saver: Arc<SledCheckpointer>,
    _dir: tempfile::TempDir,
}

impl Sled {
    fn new() -> Self {
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

type Made = (Arc<dyn Checkpointer>, tempfile::TempDir);

fn on_sled() -> Made {
    let dir = tempfile::tempdir().unwrap();
    let store = SledCheckpointer::open(dir.path().join("db")).unwrap();
    (Arc::new(store), dir)
}

fn in_folders() -> Made {
    let dir = tempfile::tempdir().unwrap();
    let store = FolderCheckpointer::open(dir.path().join("threads")).unwrap();
    (Arc::new(store), dir)
}

conformance_suite!(sled: super::Sled::new());
mod subgraphs {
    stategraph_checkpoint_conformance::subgraph_suite!(sled: super::super::on_sled());
    stategraph_checkpoint_conformance::subgraph_suite!(folders: super::super::in_folders());
}

/// `SledStore`, the long-term store, in a temporary directory.
struct SledItems {
    store: Arc<stategraph_sled::SledStore>,
    _dir: tempfile::TempDir,
}

impl stategraph_checkpoint_conformance::store_checks::StoreUnderTest for SledItems {
    fn store(&self) -> Arc<dyn stategraph_checkpoint::store::Store> {
        self.store.clone()
    }
}

fn sled_items(
    clock: Arc<stategraph_checkpoint::store::FakeClock>,
) -> Box<dyn stategraph_checkpoint_conformance::store_checks::StoreUnderTest> {
    let dir = tempfile::tempdir().unwrap();
    let store =
        stategraph_sled::SledStore::open_with_clock(dir.path().join("items"), clock).unwrap();
    Box::new(SledItems {
        store: Arc::new(store),
        _dir: dir,
    })
}

stategraph_checkpoint_conformance::store_suite!(sled_item_store: sled_items);
