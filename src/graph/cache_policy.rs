//! A node's cache policy: which inputs count as the same, and for how long a result is served.
//! The runtime's `runtime/cache.rs` looks results up and stores them.

use crate::checkpoint::NodeCache;
use crate::run::config::RunConfig;
use std::sync::Arc;
use std::time::Duration;

/// Computes a cache key from a node's input as JSON: the state (as of the start of the step),
/// or a [`Send`](super::Send)'s argument for a task started by one.
///
/// ```
/// use std::sync::Arc;
/// use stategraph::graph::CacheKeyFn;
/// let by_url: CacheKeyFn = Arc::new(|input| input["url"].as_str().unwrap_or("").to_string());
/// assert_eq!(by_url(&serde_json::json!({"url": "https://a.example"})), "https://a.example");
/// ```
pub type CacheKeyFn = Arc<dyn Fn(&serde_json::Value) -> String + Send + Sync>;

/// How a node's results are cached: a node whose input gives a key already in the run's cache
/// (see [`RunConfig::cache`](crate::run::config::RunConfig::cache)) does not run; its cached update
/// (and its command's destinations) are written as if it had, and the stream and the thread's
/// history mark it as a hit.
///
/// `key` is a function of the node's input; the default is a hash of the input's JSON and the
/// node's name, so any change to the state the node sees is a miss (a field serialized in no
/// fixed order, such as a `HashMap`, can make equal states miss, never hit wrongly). Entries are
/// shared by every thread and run of the graph (by its name) that use the same cache. Only
/// finished results are cached: a failure or a pause is never served from the cache.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// # use serde::{Deserialize, Serialize};
/// # use stategraph::{graph::{StateGraph, CachePolicy}, runtime::{Context, NodeError}, State};
/// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { query: String, answer: String }
/// let mut g = StateGraph::<S>::new();
/// g.add_node("search", |s: Arc<S>, _c: Context| async move {
///     Ok(SUpdate::default().answer(format!("results for {}", s.query)))
/// })
/// .cache(CachePolicy {
///     // Only the query matters to this node, whatever else the state holds.
///     key: Some(Arc::new(|input| input["query"].to_string())),
///     ttl: Some(Duration::from_secs(3600)),
/// });
/// ```
#[derive(Clone, Default)]
pub struct CachePolicy {
    /// The key of an input; `None`: a hash of the input's JSON and the node's name.
    pub key: Option<CacheKeyFn>,
    /// How long a result is served after it was stored; `None`: until the cache is cleared.
    pub ttl: Option<Duration>,
}

impl std::fmt::Debug for CachePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachePolicy")
            .field("key", &self.key.as_ref().map(|_| "custom"))
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl CachePolicy {
    /// Caches by the default key, with no expiry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph::graph::CachePolicy;
    /// let policy = CachePolicy::new().ttl(Duration::from_secs(60));
    /// assert_eq!(policy.ttl, Some(Duration::from_secs(60)));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves a result for `ttl` after it was stored.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Keys inputs by `key` (of the input as JSON) instead of the default hash.
    ///
    /// ```
    /// use stategraph::graph::CachePolicy;
    /// let policy = CachePolicy::new().key(|input| input["url"].to_string());
    /// assert!(policy.key.is_some());
    /// ```
    pub fn key(
        mut self,
        key: impl Fn(&serde_json::Value) -> String + Send + Sync + 'static,
    ) -> Self {
        self.key = Some(Arc::new(key));
        self
    }
}

impl RunConfig {
    /// Looks cached node results up in `cache` and stores new ones there: nodes with a
    /// [`CachePolicy`] whose input's entry holds a result do not run. Share one cache between
    /// runs (and threads) to share their results.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::checkpoint::{MemoryCache, NodeCache};
    /// use stategraph::runtime::RunConfig;
    /// let cache: Arc<dyn NodeCache> = Arc::new(MemoryCache::new());
    /// let config = RunConfig::new().cache(cache.clone());
    /// assert!(config.cache.is_some());
    /// ```
    pub fn cache(mut self, cache: Arc<dyn NodeCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Bypasses the cache when `bypass` is true: every node runs, nothing is stored.
    ///
    /// ```
    /// use stategraph::runtime::RunConfig;
    /// assert!(RunConfig::new().no_cache(true).no_cache);
    /// ```
    pub fn no_cache(mut self, bypass: bool) -> Self {
        self.no_cache = bypass;
        self
    }
}
