//! The long-term store beside the threads of `--db`: `<db>/items/` (a sled directory) for a
//! folder of threads, the database's `stategraph_store_items` for Postgres; with text search
//! (`stategraph-store`), and semantic search when `GRAPH_EMBEDDINGS_URL` names an embeddings
//! endpoint.
//!
//! A run gets it lazily ([`for_runs`]): the sled directory admits one process at a time, so a
//! run opens it only when one of its nodes first uses the store, and concurrent runs that
//! never do are not kept out.

use crate::store::Store as Threads;
use async_trait::async_trait;
use stategraph::checkpoint::store::{
    Item, MemoryStore, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store, StoreError,
    StoreOp, SystemClock,
};
use stategraph::runtime::SharedStore;
use stategraph_sled::SledStore;
use stategraph_store::{Embedder, IndexedStore};
use std::sync::Arc;
use std::time::Duration;

/// The folder of a folder of threads that holds its long-term store (as `SledStore::beside`).
const ITEMS: &str = "items";

/// How long opening waits for another process that has the sled directory open.
const OPEN_WAIT: Duration = Duration::from_secs(5);

/// Opens the long-term store of `threads`' database now. For a command that only reads
/// (`reading`), a folder without a store yet is an empty store, and nothing is created.
pub(crate) fn open(threads: &Threads, reading: bool) -> Result<Arc<dyn Store>, StoreError> {
    let backend: Arc<dyn Store> = match threads {
        Threads::Folder(f) if reading && !f.root().join(ITEMS).exists() => {
            Arc::new(MemoryStore::new())
        }
        Threads::Folder(f) => Arc::new(SledStore::open_waiting(
            f.root().join(ITEMS),
            Arc::new(SystemClock),
            OPEN_WAIT,
        )?),
        Threads::Postgres(p) => Arc::new(p.saver.item_store()),
    };
    let mut indexed = IndexedStore::new(backend)?;
    if let Some(embedder) = Embedder::from_env()? {
        indexed = indexed.with_embedder(embedder);
    }
    Ok(Arc::new(indexed))
}

/// The long-term store for a run's nodes, opened when first used.
pub(crate) fn for_runs(threads: &Threads) -> SharedStore {
    SharedStore(Arc::new(Lazy {
        threads: threads.clone(),
        opened: tokio::sync::OnceCell::new(),
    }))
}

struct Lazy {
    threads: Threads,
    opened: tokio::sync::OnceCell<Arc<dyn Store>>,
}

impl Lazy {
    async fn store(&self) -> Result<&Arc<dyn Store>, StoreError> {
        self.opened
            .get_or_try_init(|| async {
                let threads = self.threads.clone();
                // Opening may wait for another process: off the async workers.
                tokio::task::spawn_blocking(move || open(&threads, false))
                    .await
                    .map_err(|e| StoreError::Backend(format!("opening the store failed: {e}")))?
            })
            .await
    }
}

#[async_trait]
impl Store for Lazy {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        self.store().await?.batch(ops).await
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.store().await?.get(namespace, key).await
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        self.store().await?.search(request).await
    }

    async fn list_namespaces(&self, q: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        self.store().await?.list_namespaces(q).await
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        self.store().await?.sweep_expired().await
    }
}
