//! `PostgresStore`, the long-term store, runs the store checks of the conformance kit, each on
//! a database of its own in a real Postgres cluster (`support/pg_cluster.rs`); and again under
//! `stategraph_crypt::EncryptedStore`, every value sealed.

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

fn sealed(clock: Arc<FakeClock>) -> Box<dyn StoreUnderTest> {
    let plain = postgres(clock);
    let key = stategraph_crypt::Key::new("k1", [5; 32]).unwrap();
    let keys = stategraph_crypt::Keyring::new(vec![key]).unwrap();
    let store = Arc::new(stategraph_crypt::EncryptedStore::new(plain.store(), keys));
    Box::new(Sealed {
        store,
        _plain: plain,
    })
}

struct Sealed {
    store: Arc<dyn Store>,
    _plain: Box<dyn StoreUnderTest>,
}

impl StoreUnderTest for Sealed {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

store_suite!(postgres_store: super::postgres);
store_suite!(sealed_postgres_store: super::sealed);
