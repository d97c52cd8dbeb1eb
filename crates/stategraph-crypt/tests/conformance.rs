//! The checkpointer conformance kit over encrypted stores: `EncryptedCheckpointer` over the
//! memory store, sled and Postgres (a real throwaway cluster, `pg_cluster.rs`): every check but
//! two byte bounds, see below. The damage checks reach the backend's stored bytes
//! (sealed), so damage below the seal is still reported by the backend as damage.

#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
#[allow(dead_code)]
mod pg_cluster;

use stategraph_checkpoint::{CheckpointId, Checkpointer, MemoryCheckpointer};
use stategraph_checkpoint_conformance::Backend;
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_sled::SledCheckpointer;
use std::sync::Arc;

fn keys() -> Keyring {
    Keyring::new(vec![
        Key::new("current", [3; 32]).unwrap(),
        Key::new("older", [4; 32]).unwrap(),
    ])
    .unwrap()
}

/// The memory store, sealed.
struct SealedMemory {
    inner: Arc<MemoryCheckpointer>,
    saver: Arc<EncryptedCheckpointer>,
}

impl SealedMemory {
    fn new() -> Self {
        let inner = Arc::new(MemoryCheckpointer::new());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedMemory { inner, saver }
    }
}

impl Backend for SealedMemory {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper(thread, checkpoint, damage);
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper_pieces(thread, damage);
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.inner.stored_bytes(thread)
    }
}

/// sled in a temporary directory, sealed.
struct SealedSled {
    saver: Arc<EncryptedCheckpointer>,
    inner: Arc<SledCheckpointer>,
    _dir: tempfile::TempDir,
}

impl SealedSled {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(SledCheckpointer::open(dir.path().join("store")).unwrap());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedSled {
            saver,
            inner,
            _dir: dir,
        }
    }
}

impl Backend for SealedSled {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper(thread, checkpoint, damage).unwrap();
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper_pieces(thread, damage).unwrap();
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.inner.stored_bytes(thread).unwrap()
    }
}

/// Postgres on a database of its own, sealed.
struct SealedPostgres {
    // Declared before the database, so the pool closes before the database is dropped.
    saver: Arc<EncryptedCheckpointer>,
    inner: Arc<PostgresCheckpointer>,
    _db: pg_cluster::TestDatabase,
}

impl SealedPostgres {
    async fn new() -> Self {
        let db = pg_cluster::cluster().database();
        let inner = Arc::new(PostgresCheckpointer::connect(db.url()).await.unwrap());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedPostgres {
            saver,
            inner,
            _db: db,
        }
    }

    /// Runs one of the store's async test hooks from the kit's synchronous ones (the kit's
    /// tests run on a multi-threaded runtime).
    fn wait<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(work))
    }
}

impl Backend for SealedPostgres {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.inner.tamper(thread, checkpoint, damage))
            .unwrap();
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.inner.tamper_pieces(thread, damage)).unwrap();
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.wait(self.inner.stored_bytes(thread)).unwrap()
    }
}

// Every check of the kit but two whose byte bounds are for plaintext records (the kit's
// `sealed_conformance_suite!`): sealed, a record carries a nonce, a tag, a key id and base64
// (about 4/3 of its size plus ~90 bytes), which puts a thread of 100-byte steps at ~6.8 times
// its state where `snapshots_stay_linear` allows 6, and one large snapshot at 1.35 times where
// `pruning_and_deleting_free_the_pieces` allows 1.02. `tests/storage.rs` runs the same scenarios with the bounds encryption can keep
// (storage still grows with what changed; pruning and deleting still free pieces).
stategraph_checkpoint_conformance::sealed_conformance_suite!(sealed_memory: super::SealedMemory::new());
stategraph_checkpoint_conformance::sealed_conformance_suite!(sealed_sled: super::SealedSled::new());
stategraph_checkpoint_conformance::sealed_conformance_suite!(sealed_postgres: super::SealedPostgres::new().await);

mod subgraphs {
    use super::*;
    fn sealed() -> (Arc<dyn Checkpointer>, ()) {
        let inner = Arc::new(MemoryCheckpointer::new());
        (Arc::new(EncryptedCheckpointer::new(inner, keys())), ())
    }
    stategraph_checkpoint_conformance::subgraph_suite!(sealed_memory: super::sealed());

    async fn sealed_postgres() -> (Arc<dyn Checkpointer>, pg_cluster::TestDatabase) {
        let db = pg_cluster::cluster().database();
        let inner = Arc::new(PostgresCheckpointer::connect(db.url()).await.unwrap());
        (Arc::new(EncryptedCheckpointer::new(inner, keys())), db)
    }
    stategraph_checkpoint_conformance::subgraph_suite!(sealed_postgres: super::sealed_postgres().await);
}
