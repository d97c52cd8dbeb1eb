//! The memory backend of the long-term store passes the store checks.

use stategraph::checkpoint::store::{FakeClock, MemoryStore, Store};
use stategraph_checkpoint_conformance::store_checks::StoreUnderTest;
use stategraph_checkpoint_conformance::store_suite;
use std::sync::Arc;

struct Memory(Arc<MemoryStore>);

impl StoreUnderTest for Memory {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }
}

fn memory(clock: Arc<FakeClock>) -> Box<dyn StoreUnderTest> {
    Box::new(Memory(Arc::new(MemoryStore::with_clock(clock))))
}

store_suite!(memory_store: memory);
