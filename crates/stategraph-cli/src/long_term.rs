//! The long-term store beside the threads of `--db`: `<db>/items/` (a sled directory) for a
//! folder of threads, the database's `stategraph_store_items` for Postgres; with text search
//! (`stategraph-store`), and semantic search when `GRAPH_EMBEDDINGS_URL` names an embeddings
//! endpoint.
//!
//! A run gets it lazily ([`for_runs`]): the sled directory admits one process at a time, so a
//! run opens it only when one of its nodes first uses the store, and concurrent runs that
//! never do are not kept out. A run's store applies its graph file's item TTL settings
//! (`[retention]` `items_ttl_days`, `items_refresh_on_read`).
//!
//! Encryption: the items' values are sealed with the keys of `GRAPH_ENCRYPTION_KEY` (or
//! `_FILE`), as the threads' records are (`stategraph_crypt::EncryptedStore`); with none
//! configured, values are written plaintext and a sealed one read is refused naming the item
//! and the key it needs. The layers, from the backend up: backend, encryption, search index,
//! so the text index is built from opened values and lives only in this process's memory.

use crate::store::Store as Threads;
use async_trait::async_trait;
use stategraph::checkpoint::store::{
    Item, MemoryStore, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store, StoreError,
    StoreOp, SystemClock, TtlConfig,
};
use stategraph::runtime::SharedStore;
use stategraph_crypt::{EncryptedStore, Keyring};
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
    open_with(threads, reading, TtlConfig::default())
}

/// The keys items are sealed with: those the threads' records are sealed with.
fn keys(threads: &Threads) -> Keyring {
    threads.sealed().keyring().clone()
}

/// The backend alone (no encryption, no index): what `graph rekey` reseals items through.
pub(crate) fn open_backend(
    threads: &Threads,
    reading: bool,
    ttl: TtlConfig,
) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match threads {
        Threads::Folder(f) if reading && !f.root().join(ITEMS).exists() => {
            Arc::new(MemoryStore::new().with_ttl(ttl))
        }
        Threads::Folder(f) => Arc::new(
            SledStore::open_waiting(f.root().join(ITEMS), Arc::new(SystemClock), OPEN_WAIT)?
                .with_ttl(ttl),
        ),
        Threads::Postgres(p) => Arc::new(p.saver.item_store().with_ttl(ttl)),
    })
}

/// As [`open`], with a default TTL and refresh-on-read setting (a graph file's `[retention]`).
pub(crate) fn open_with(
    threads: &Threads,
    reading: bool,
    ttl: TtlConfig,
) -> Result<Arc<dyn Store>, StoreError> {
    let backend = open_backend(threads, reading, ttl)?;
    let sealed: Arc<dyn Store> = Arc::new(EncryptedStore::new(backend, keys(threads)));
    let mut indexed = IndexedStore::new(sealed)?;
    if let Some(embedder) = Embedder::from_env()? {
        indexed = indexed.with_embedder(embedder);
    }
    Ok(Arc::new(indexed))
}

/// The long-term store for a run's nodes, opened when first used.
pub(crate) fn for_runs(threads: &Threads) -> SharedStore {
    for_runs_with(threads, TtlConfig::default())
}

/// As [`for_runs`], treating TTLs as `ttl` says (the run's graph file's `[retention]` item
/// settings, [`stategraph_registry::RetentionPolicy::items_ttl`]).
pub(crate) fn for_runs_with(threads: &Threads, ttl: TtlConfig) -> SharedStore {
    SharedStore(Arc::new(Lazy {
        threads: threads.clone(),
        ttl,
        opened: tokio::sync::OnceCell::new(),
    }))
}

struct Lazy {
    threads: Threads,
    ttl: TtlConfig,
    opened: tokio::sync::OnceCell<Arc<dyn Store>>,
}

impl Lazy {
    async fn store(&self) -> Result<&Arc<dyn Store>, StoreError> {
        self.opened
            .get_or_try_init(|| async {
                let (threads, ttl) = (self.threads.clone(), self.ttl);
                // Opening may wait for another process: off the async workers.
                tokio::task::spawn_blocking(move || open_with(&threads, false, ttl))
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

    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        self.store()
            .await?
            .get_with(namespace, key, refresh_ttl)
            .await
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
