//! [`MemoryStore`]: items in a map, for tests and short-lived programs.

use super::{
    filter_matches, namespace_matches, page, select_namespaces, Clock, Item, Namespace,
    NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp, SystemClock, TtlConfig,
};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

type Items = BTreeMap<(Namespace, String), Item>;

/// A store in memory. Cheap to clone (clones share the items).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use stategraph_checkpoint::store::{MemoryStore, Store};
/// let store = MemoryStore::new();
/// store.put(&["notes"], "1", serde_json::json!("remember the milk")).await?;
/// assert!(store.get(&["notes".into()], "1").await?.is_some());
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    items: Arc<Mutex<Items>>,
    clock: Arc<dyn Clock>,
    ttl: TtlConfig,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store whose TTLs run on `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryStore {
            items: Arc::default(),
            clock,
            ttl: TtlConfig::default(),
        }
    }

    /// The same store with a default TTL and refresh-on-read setting (see [`TtlConfig`]).
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Refreshes the TTL of `found` (live items just read) in the map; returns them as they
    /// now are.
    fn refresh(&self, found: Vec<Item>, now: u64) -> Vec<Item> {
        let mut items = self.items();
        found
            .into_iter()
            .map(|item| match item.refreshed_at(now) {
                Some(fresh) => {
                    items.insert((fresh.namespace.clone(), fresh.key.clone()), fresh.clone());
                    fresh
                }
                None => item,
            })
            .collect()
    }

    fn items(&self) -> MutexGuard<'_, Items> {
        // A batch is applied to a copy and swapped in whole, so a poisoned lock holds no
        // half-applied batch.
        match self.items.lock() {
            Ok(items) => items,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        for op in ops {
            op.validate()?;
        }
        let ops = self.ttl.apply(ops);
        let now = self.clock.now_ms();
        let mut items = self.items();
        let mut next = items.clone();
        for op in &ops {
            let (namespace, key) = op.target();
            let id = (namespace.clone(), key.to_string());
            match op.item_after(next.get(&id), now) {
                Some(item) => next.insert(id, item),
                None => next.remove(&id),
            };
        }
        *items = next;
        Ok(())
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.get_with(namespace, key, None).await
    }

    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        let now = self.clock.now_ms();
        let id = (namespace.to_vec(), key.to_string());
        let found = self
            .items()
            .get(&id)
            .filter(|item| !item.expired_at(now))
            .cloned();
        Ok(match found {
            Some(item) if self.ttl.refreshes(refresh_ttl) => self.refresh(vec![item], now).pop(),
            found => found,
        })
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        if request.query.is_some() {
            return Err(StoreError::NeedsIndex);
        }
        let now = self.clock.now_ms();
        let found: Vec<Item> = self
            .items()
            .values()
            .filter(|item| !item.expired_at(now))
            .filter(|item| namespace_matches(&item.namespace, &request.namespace_prefix))
            .filter(|item| filter_matches(&item.value, &request.filter))
            .cloned()
            .collect();
        let mut hits = page(found, request.offset, request.limit);
        if self.ttl.refreshes(request.refresh_ttl) {
            let items = hits.drain(..).map(|hit| hit.item).collect();
            hits = page(self.refresh(items, now), 0, 0);
        }
        Ok(hits)
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        let now = self.clock.now_ms();
        let items = self.items();
        let live = items
            .values()
            .filter(|item| !item.expired_at(now))
            .map(|item| &item.namespace);
        Ok(select_namespaces(live, query))
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        let now = self.clock.now_ms();
        let mut items = self.items();
        let before = items.len();
        items.retain(|_, item| !item.expired_at(now));
        Ok(before - items.len())
    }
}
