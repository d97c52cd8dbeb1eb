//! `PostgresStore`, the long-term store, runs the store checks of the conformance kit, each on
//! a database of its own in a real Postgres cluster (`support/pg_cluster.rs`).

mod support;

use stategraph_checkpoint::store::{FakeClock, Store};
use stategraph_checkpoint_conformance::store_checks::StoreUnderTest;
use stategraph_checkpoint_conformance::store_suite;
use stategraph_postgres::PostgresCheckpointer;
use std::sync::Arc;
use support::pg_cluster::{cluster, TestDatabase};

struct Postgres {
    // Declared before the database, so the pool closes before the database is dropped.
    store: Arc<dyn Store>,
    _db: TestDatabase,
}

impl StoreUnderTest for Postgres {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

fn postgres(clock: Arc<FakeClock>) -> Box<dyn StoreUnderTest> {
    let db = cluster().database();
    // The kit's checks run on a multi-threaded runtime: connect on it without leaving it.
    let saver = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(PostgresCheckpointer::connect(db.url()))
    })
    .unwrap();
    Box::new(Postgres {
        store: Arc::new(saver.item_store_with_clock(clock)),
        _db: db,
    })
}

store_suite!(postgres_store: super::postgres);
