//! One store, several graphs' TTL settings: a long-running process (a server, a worker) opens
//! its store once and runs many graphs over it, each graph file with its own `[retention]` item
//! settings. [`WithTtl`] gives one run's view of the shared store those settings, without a
//! second open of the backend (a sled directory admits one opener).

use super::{
    Item, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp,
    TtlConfig,
};
use async_trait::async_trait;
use std::sync::Arc;

/// `inner` with `ttl` as its defaults: a put without a TTL gets `ttl.default_ttl_ms`, and a read
/// that does not say whether to refresh does what `ttl.refresh_on_read` says (an explicit
/// choice of the caller still wins).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{MemoryStore, Store, TtlConfig, WithTtl};
/// let shared: Arc<dyn Store> = Arc::new(MemoryStore::new());
/// let ttl = TtlConfig { default_ttl_ms: Some(60_000), refresh_on_read: true };
/// let for_this_graph = WithTtl::new(shared.clone(), ttl);
/// for_this_graph.put(&["users", "ada"], "prefs", serde_json::json!("dark")).await?;
/// let item = shared.get(&["users".into(), "ada".into()], "prefs").await?.unwrap();
/// assert_eq!(item.ttl_ms, Some(60_000), "the graph's default TTL");
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
pub struct WithTtl {
    inner: Arc<dyn Store>,
    ttl: TtlConfig,
}

impl WithTtl {
    /// `inner` seen with `ttl`'s defaults.
    pub fn new(inner: Arc<dyn Store>, ttl: TtlConfig) -> Self {
        WithTtl { inner, ttl }
    }
}

#[async_trait]
impl Store for WithTtl {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        self.inner.batch(&self.ttl.apply(ops)).await
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
        let refresh = self.ttl.refreshes(refresh_ttl);
        self.inner.get_with(namespace, key, Some(refresh)).await
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        let mut request = request.clone();
        request.refresh_ttl = Some(self.ttl.refreshes(request.refresh_ttl));
        self.inner.search(&request).await
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        self.inner.list_namespaces(query).await
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        self.inner.sweep_expired().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{FakeClock, MemoryStore};

    fn ns(labels: &[&str]) -> Namespace {
        labels.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn a_runs_view_applies_its_graphs_ttl_and_refresh_to_the_shared_store() {
        let clock = Arc::new(FakeClock::at(1_000));
        let shared: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
        let refreshing = WithTtl::new(
            shared.clone(),
            TtlConfig {
                default_ttl_ms: Some(100),
                refresh_on_read: true,
            },
        );
        let plain = WithTtl::new(shared.clone(), TtlConfig::default());
        refreshing
            .put(&["a"], "k", serde_json::json!(1))
            .await
            .unwrap();
        plain.put(&["b"], "k", serde_json::json!(2)).await.unwrap();
        let b = shared.get(&ns(&["b"]), "k").await.unwrap().unwrap();
        assert_eq!(b.ttl_ms, None, "the other graph gives no default TTL");

        clock.advance(80);
        assert!(refreshing.get(&ns(&["a"]), "k").await.unwrap().is_some());
        clock.advance(80);
        assert!(
            plain.get(&ns(&["a"]), "k").await.unwrap().is_some(),
            "the refreshing view's read moved the expiry"
        );
        clock.advance(30);
        assert!(
            shared.get(&ns(&["a"]), "k").await.unwrap().is_none(),
            "a read that did not refresh left it to expire"
        );
    }
}
