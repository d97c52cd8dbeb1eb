//! The long-term store: items a graph keeps across threads (what a user told an agent, say),
//! under a namespace (a path of strings) and a key, with a JSON value, times and an optional
//! time to live. LangGraph calls it `BaseStore`.
//!
//! It sits here, beside the [`Checkpointer`](crate::Checkpointer) contract and not in the engine,
//! because its backends (sled, Postgres) sit below the engine as the checkpointers' do. By job:
//! - this file: the [`Store`] contract and its records ([`Item`], [`StoreOp`], [`SearchRequest`],
//!   [`NamespaceQuery`]);
//! - `select.rs`: what a search or a namespace listing selects, shared by every backend so they
//!   agree on filters, order and paging (and how a wrapper refreshes the TTLs of a page);
//! - `clock.rs`: the time TTLs are measured against, which tests replace ([`TtlConfig`], here,
//!   says how a store uses them: a default TTL, and whether reads refresh it);
//! - `memory.rs`: [`MemoryStore`];
//! - `ttl_defaults.rs`: [`WithTtl`], one run's view of a shared store with its graph's TTL
//!   settings;
//! - `error.rs`: [`StoreError`].
//!
//! Text and semantic queries need an index: a backend answers structural searches (namespace
//! prefix, filters, paging) and refuses a text query with [`StoreError::NeedsIndex`];
//! `stategraph-store`'s `IndexedStore` wraps any backend and answers them.
//!
//! An expired item is invisible to `get`, `search` and `list_namespaces` at once;
//! [`Store::sweep_expired`] removes them. A read writes only when asked to refresh TTLs
//! ([`Store::get_with`], [`SearchRequest::refresh_ttl`], [`TtlConfig::refresh_on_read`]), and
//! then only the new expiry of what it returned.

mod clock;
mod error;
mod memory;
mod select;
mod ttl_defaults;

pub use clock::{Clock, FakeClock, SystemClock};
pub use error::StoreError;
pub use memory::MemoryStore;
pub use select::{
    filter_matches, namespace_matches, page, refresh_page, select_namespaces, FILTER_OPERATORS,
};
pub use ttl_defaults::WithTtl;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A namespace: a path of non-empty labels without `/`, such as `["users", "ada", "prefs"]`.
pub type Namespace = Vec<String>;

/// One stored item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key inside the namespace.
    pub key: String,
    /// Its value (any JSON; searches filter on its fields when it is an object).
    pub value: serde_json::Value,
    /// When it was first put (milliseconds since the Unix epoch).
    pub created_at_ms: u64,
    /// When it was last put.
    pub updated_at_ms: u64,
    /// When it stops being visible, if it was put with a time to live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// The time to live it was put with: a read that refreshes it moves `expires_at_ms` to
    /// now plus this. Absent on items put without one (and on items stored before it was
    /// kept, which a read cannot refresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

impl Item {
    /// True when the item's time to live has run out at `now_ms`.
    ///
    /// ```
    /// # use stategraph_checkpoint::store::Item;
    /// let item = Item { namespace: vec!["a".into()], key: "k".into(), value: 1.into(),
    ///     created_at_ms: 0, updated_at_ms: 0, expires_at_ms: Some(10), ttl_ms: Some(10) };
    /// assert!(!item.expired_at(9) && item.expired_at(10));
    /// ```
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms >= at)
    }

    /// The item as a read that refreshes its time to live leaves it at `now_ms`: expiring its
    /// TTL from now. `None` when there is nothing to refresh (no TTL, or already expired), so
    /// a backend writes only what changed. Its update time stays: a refresh is not a put.
    ///
    /// ```
    /// # use stategraph_checkpoint::store::StoreOp;
    /// let op = StoreOp::put(&["a"], "k", 1.into()).with_ttl_ms(100);
    /// let item = op.item_after(None, 1_000).unwrap();
    /// let later = item.refreshed_at(1_050).unwrap();
    /// assert_eq!((later.expires_at_ms, later.updated_at_ms), (Some(1_150), 1_000));
    /// assert!(item.refreshed_at(1_100).is_none(), "expired: gone, not revived");
    /// ```
    pub fn refreshed_at(&self, now_ms: u64) -> Option<Item> {
        let ttl = self.ttl_ms?;
        if self.expired_at(now_ms) {
            return None;
        }
        let expires = now_ms.saturating_add(ttl);
        (self.expires_at_ms != Some(expires)).then(|| Item {
            expires_at_ms: Some(expires),
            ..self.clone()
        })
    }
}

/// How a store treats times to live, LangGraph's `TTLConfig`: a default TTL for items put
/// without one, and whether a read refreshes an item's TTL when the call does not say
/// ([`Store::get_with`], [`SearchRequest::refresh_ttl`]). Backends take it with their
/// `with_ttl` builder; the default is neither.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{FakeClock, MemoryStore, Store, TtlConfig};
/// let clock = Arc::new(FakeClock::at(0));
/// let store = MemoryStore::with_clock(clock.clone())
///     .with_ttl(TtlConfig { default_ttl_ms: Some(1_000), refresh_on_read: true });
/// store.put(&["s"], "k", 1.into()).await?;
/// clock.advance(900);
/// assert!(store.get(&["s".into()], "k").await?.is_some(), "read: lives 1 s from now");
/// clock.advance(900);
/// assert!(store.get_with(&["s".into()], "k", Some(false)).await?.is_some());
/// clock.advance(200);
/// assert!(store.get(&["s".into()], "k").await?.is_none(), "the last read did not refresh");
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtlConfig {
    /// The time to live of an item put without one (`None`: it lives until deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<u64>,
    /// Whether a read refreshes the TTL of what it returns when the call does not say.
    #[serde(default)]
    pub refresh_on_read: bool,
}

impl TtlConfig {
    /// Whether a read asking `refresh_ttl` refreshes: the call's choice, else this default.
    pub fn refreshes(&self, refresh_ttl: Option<bool>) -> bool {
        refresh_ttl.unwrap_or(self.refresh_on_read)
    }

    /// `ops` with the default TTL given to puts without one.
    pub fn apply(&self, ops: &[StoreOp]) -> Vec<StoreOp> {
        ops.iter()
            .cloned()
            .map(|op| match (op, self.default_ttl_ms) {
                (
                    StoreOp::Put {
                        namespace,
                        key,
                        value,
                        ttl_ms: None,
                    },
                    Some(ttl),
                ) => StoreOp::Put {
                    namespace,
                    key,
                    value,
                    ttl_ms: Some(ttl),
                },
                (op, _) => op,
            })
            .collect()
    }
}

/// One change to the store. A batch of them is applied in order, and as one write where the
/// backend can (Postgres: one transaction; sled: one batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StoreOp {
    /// Creates or replaces an item; its creation time is kept when it existed (and had not
    /// expired).
    Put {
        /// Where.
        namespace: Namespace,
        /// Its key.
        key: String,
        /// Its value.
        value: serde_json::Value,
        /// Time to live in milliseconds from this put; `None` keeps it until deleted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<u64>,
    },
    /// Removes an item; removing one that is not there is not an error.
    Delete {
        /// Where.
        namespace: Namespace,
        /// Its key.
        key: String,
    },
}

impl StoreOp {
    /// A put without a time to live.
    ///
    /// ```
    /// # use stategraph_checkpoint::store::StoreOp;
    /// let op = StoreOp::put(&["users", "ada"], "lang", serde_json::json!({"likes": "Rust"}));
    /// assert!(matches!(op, StoreOp::Put { ttl_ms: None, .. }));
    /// ```
    pub fn put(namespace: &[&str], key: &str, value: serde_json::Value) -> Self {
        StoreOp::Put {
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            key: key.to_string(),
            value,
            ttl_ms: None,
        }
    }

    /// The same put with a time to live (a delete is unchanged).
    pub fn with_ttl_ms(self, ttl: u64) -> Self {
        match self {
            StoreOp::Put {
                namespace,
                key,
                value,
                ..
            } => StoreOp::Put {
                namespace,
                key,
                value,
                ttl_ms: Some(ttl),
            },
            delete => delete,
        }
    }

    /// A delete.
    pub fn delete(namespace: &[&str], key: &str) -> Self {
        StoreOp::Delete {
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            key: key.to_string(),
        }
    }

    /// The namespace and key the op is about.
    pub fn target(&self) -> (&Namespace, &str) {
        match self {
            StoreOp::Put { namespace, key, .. } | StoreOp::Delete { namespace, key } => {
                (namespace, key)
            }
        }
    }

    /// The item a put leaves, given what was there (`existing`, if live) and now: every
    /// backend computes it the same way. `None` for a delete.
    ///
    /// ```
    /// # use stategraph_checkpoint::store::StoreOp;
    /// let first = StoreOp::put(&["a"], "k", 1.into()).item_after(None, 100).unwrap();
    /// let second = StoreOp::put(&["a"], "k", 2.into()).item_after(Some(&first), 200).unwrap();
    /// assert_eq!((second.created_at_ms, second.updated_at_ms), (100, 200));
    /// ```
    pub fn item_after(&self, existing: Option<&Item>, now_ms: u64) -> Option<Item> {
        let StoreOp::Put {
            namespace,
            key,
            value,
            ttl_ms,
        } = self
        else {
            return None;
        };
        let created_at_ms = existing
            .filter(|e| !e.expired_at(now_ms))
            .map_or(now_ms, |e| e.created_at_ms);
        Some(Item {
            namespace: namespace.clone(),
            key: key.clone(),
            value: value.clone(),
            created_at_ms,
            updated_at_ms: now_ms,
            expires_at_ms: ttl_ms.map(|ttl| now_ms.saturating_add(ttl)),
            ttl_ms: *ttl_ms,
        })
    }

    /// Checks the namespace and key are ones every backend can store.
    pub fn validate(&self) -> Result<(), StoreError> {
        let (namespace, key) = self.target();
        validate_namespace(namespace)?;
        if key.is_empty() {
            return Err(StoreError::InvalidKey {
                key: key.to_string(),
                reason: "a key must not be empty",
            });
        }
        Ok(())
    }
}

/// Checks a namespace: at least one label, none empty, none holding a `/` (the separator
/// backends and the command line write namespaces with).
pub fn validate_namespace(namespace: &[String]) -> Result<(), StoreError> {
    let bad = |reason| {
        Err(StoreError::InvalidNamespace {
            namespace: namespace.join("/"),
            reason,
        })
    };
    if namespace.is_empty() {
        return bad("a namespace needs at least one label");
    }
    if namespace.iter().any(|l| l.is_empty()) {
        return bad("a namespace label must not be empty");
    }
    if namespace.iter().any(|l| l.contains('/')) {
        return bad("a namespace label must not contain `/`");
    }
    if namespace.iter().any(|l| l.chars().any(char::is_control)) {
        return bad("a namespace label must not contain control characters");
    }
    Ok(())
}

/// What to search for. Without a `query` a search lists the matching items, most recently
/// updated first; with one, best match first (an index is needed: see the module's doc).
///
/// ```
/// # use stategraph_checkpoint::store::SearchRequest;
/// let request = SearchRequest::under(&["users", "ada"])
///     .filter("kind", "preference")
///     .text("favourite language")
///     .limit(5);
/// assert_eq!(request.limit, 5);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchRequest {
    /// Only items whose namespace starts with these labels (all items when empty).
    pub namespace_prefix: Namespace,
    /// Only items whose value has these fields with these values (a dotted name reaches into
    /// nested objects: `"user.name"`), or values that meet comparisons (`{"$gte": 3}`; see
    /// [`filter_matches`]).
    pub filter: serde_json::Map<String, serde_json::Value>,
    /// A text query, matched against the indexed fields.
    pub query: Option<String>,
    /// At most this many items (all when 0).
    pub limit: usize,
    /// Skipping this many first.
    pub offset: usize,
    /// Whether the items returned have their TTL refreshed: `None` leaves it to the store's
    /// [`TtlConfig::refresh_on_read`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_ttl: Option<bool>,
}

impl SearchRequest {
    /// Everything under `prefix`, ten at a time.
    pub fn under(prefix: &[&str]) -> Self {
        SearchRequest {
            namespace_prefix: prefix.iter().map(|s| s.to_string()).collect(),
            limit: 10,
            ..SearchRequest::default()
        }
    }

    /// Adds a field filter.
    pub fn filter(mut self, field: &str, value: impl Into<serde_json::Value>) -> Self {
        self.filter.insert(field.to_string(), value.into());
        self
    }

    /// Sets the text query.
    pub fn text(mut self, query: &str) -> Self {
        self.query = Some(query.to_string());
        self
    }

    /// Sets the page size.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets how many to skip.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Refreshes (or, with `false`, does not) the TTL of the items returned, whatever the
    /// store's default.
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }
}

/// One search result: the item, and how well it matched a text query (higher is better;
/// `None` without a query).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The item.
    pub item: Item,
    /// The match score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

/// Which namespaces to list ([`Store::list_namespaces`]).
///
/// ```
/// # use stategraph_checkpoint::store::NamespaceQuery;
/// // Every user's namespace, cut to two labels: ["users", "ada"], ["users", "bo"], ...
/// let query = NamespaceQuery { prefix: vec!["users".into()], max_depth: Some(2), ..Default::default() };
/// # let _ = query;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceQuery {
    /// Only namespaces starting with these labels (`"*"` matches any one label).
    pub prefix: Namespace,
    /// Only namespaces ending with these labels (`"*"` matches any one label).
    pub suffix: Namespace,
    /// Namespaces longer than this are cut to it (and then listed once).
    pub max_depth: Option<usize>,
    /// At most this many (all when 0).
    pub limit: usize,
    /// Skipping this many first.
    pub offset: usize,
}

/// Where long-term items live. Implemented by [`MemoryStore`], `stategraph-sled`'s `SledStore`
/// and `stategraph-postgres`'s `PostgresStore`; all pass the conformance kit's store checks.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use stategraph_checkpoint::store::{MemoryStore, SearchRequest, Store};
/// let store = MemoryStore::new();
/// store.put(&["users", "ada"], "lang", serde_json::json!({"likes": "Rust"})).await?;
/// let item = store.get(&["users".into(), "ada".into()], "lang").await?.expect("just put");
/// assert_eq!(item.value["likes"], "Rust");
/// let hits = store.search(&SearchRequest::under(&["users"]).filter("likes", "Rust")).await?;
/// assert_eq!(hits.len(), 1);
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies `ops` in order; on an error none of them is visible where the backend can
    /// promise it (every backend here does).
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError>;

    /// The item, unless absent or expired. A store whose [`TtlConfig::refresh_on_read`] is on
    /// refreshes its TTL (see [`get_with`](Self::get_with)).
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError>;

    /// As [`get`](Self::get), choosing whether the item's TTL starts again from now (LangGraph's
    /// `get(..., refresh_ttl=)`): `Some(true)` refreshes, `Some(false)` does not, `None` does
    /// what the store's [`TtlConfig`] says. The item returned shows its new expiry. Such a read
    /// writes the new expiry, and only it (an item without a TTL is not written).
    ///
    /// Every backend here implements it; a store that does not (a test double forwarding
    /// `get`) refuses `Some(true)` with [`StoreError::CannotRefresh`] rather than ignore it.
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        if refresh_ttl == Some(true) {
            return Err(StoreError::CannotRefresh);
        }
        self.get(namespace, key).await
    }

    /// The items matching `request` (see [`SearchRequest`]).
    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError>;

    /// The namespaces holding at least one live item, sorted, selected by `query`.
    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError>;

    /// Removes every expired item; returns how many.
    async fn sweep_expired(&self) -> Result<usize, StoreError>;

    /// Puts one item without a time to live.
    async fn put(
        &self,
        namespace: &[&str],
        key: &str,
        value: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.batch(&[StoreOp::put(namespace, key, value)]).await
    }

    /// Deletes one item.
    async fn delete(&self, namespace: &[&str], key: &str) -> Result<(), StoreError> {
        self.batch(&[StoreOp::delete(namespace, key)]).await
    }
}
