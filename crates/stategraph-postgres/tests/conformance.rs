//! `PostgresCheckpointer` runs the checkpointer conformance kit, every check and the subgraph
//! checks, each on a database of its own in a real Postgres cluster (`support/pg_cluster.rs`).

mod support;

use stategraph_checkpoint::{CheckpointId, Checkpointer};
use stategraph_checkpoint_conformance::{conformance_suite, Backend};
use stategraph_postgres::PostgresCheckpointer;
use std::sync::Arc;
use support::pg_cluster::{cluster, TestDatabase};

/// `PostgresCheckpointer` on a fresh database.
struct Postgres {
    // Declared before the database, so the pool closes before the database is dropped.
    saver: Arc<PostgresCheckpointer>,
    _db: TestDatabase,
}

impl Postgres {
    async fn new() -> Self {
        let db = cluster().database();
        let saver = PostgresCheckpointer::connect(db.url()).await.unwrap();
        Postgres {
            saver: Arc::new(saver),
            _db: db,
        }
    }

    /// Runs one of the store's async test hooks from the kit's synchronous ones. The kit's
    /// tests run on a multi-threaded runtime, whose other worker keeps the pool's connections
    /// going meanwhile.
    fn wait<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(work))
    }
}

impl Backend for Postgres {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }

    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.saver.tamper(thread, checkpoint, damage))
            .unwrap();
    }

    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.saver.tamper_pieces(thread, damage)).unwrap();
    }

    fn stored_bytes(&self, thread: &str) -> u64 {
        self.wait(self.saver.stored_bytes(thread)).unwrap()
    }
}

async fn on_postgres() -> (Arc<dyn Checkpointer>, TestDatabase) {
    let db = cluster().database();
    let saver = PostgresCheckpointer::connect(db.url()).await.unwrap();
    (Arc::new(saver), db)
}

conformance_suite!(postgres: super::Postgres::new().await);
mod subgraphs {
    stategraph_checkpoint_conformance::subgraph_suite!(postgres: super::super::on_postgres().await);
}
