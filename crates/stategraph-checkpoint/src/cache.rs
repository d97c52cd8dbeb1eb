//! The node cache contract: where a node's result for one input is kept, so that the same input
//! does not run the node again, in any thread or run of the graph.
//!
//! A cache moves bytes: an entry is a node's result as JSON (what it means is the engine's),
//! framed and checksummed by [`encode_entry`] like every stored record, so a damaged entry is
//! found by [`decode_entry`] and reported, never read as another value. Entries are addressed by
//! [`CacheKey`]: the graph's name, the node's, and the key its cache policy computed from the
//! node's input. [`MemoryCache`] keeps them in memory; `stategraph-sled` and
//! `stategraph-postgres` keep them on disk.

use super::codec::{self, FrameError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Where one cached result lives: the graph, the node and the key its policy computed.
///
/// ```
/// use stategraph_checkpoint::CacheKey;
/// let key = CacheKey::new("research", "fetch", "3f2a");
/// assert_eq!(key.node, "fetch");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    /// The graph's name (empty for an unnamed graph: unnamed graphs share their entries).
    pub graph: String,
    /// The node's name.
    pub node: String,
    /// The key the node's cache policy computed from its input.
    pub key: String,
}

impl CacheKey {
    /// The address of `key` for `node` of `graph`.
    pub fn new(graph: impl Into<String>, node: impl Into<String>, key: impl Into<String>) -> Self {
        CacheKey {
            graph: graph.into(),
            node: node.into(),
            key: key.into(),
        }
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` of graph `{}` (key {})",
            self.node, self.graph, self.key
        )
    }
}

/// One cached result, as stored.
///
/// ```
/// use stategraph_checkpoint::CacheEntry;
/// let raw = serde_json::value::to_raw_value(&serde_json::json!({"update": {"n": 1}})).unwrap();
/// let entry = CacheEntry::new(raw, 1_000, Some(61_000));
/// assert!(!entry.is_expired(60_999));
/// assert!(entry.is_expired(61_000));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The node's result as JSON; the engine says what it holds.
    pub value: Box<RawValue>,
    /// When it was stored, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it stops being served; `None`: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

impl CacheEntry {
    /// An entry holding `value`, stored at `created_at_ms`, served until `expires_at_ms`.
    pub fn new(value: Box<RawValue>, created_at_ms: u64, expires_at_ms: Option<u64>) -> Self {
        CacheEntry {
            value,
            created_at_ms,
            expires_at_ms,
        }
    }

    /// True once `now_ms` has reached the entry's expiry.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms >= at)
    }
}

/// What can go wrong with a cache. The engine treats every one of them as a miss (and logs it):
/// a cache only ever saves work.
///
/// ```
/// use stategraph_checkpoint::CacheError;
/// let e = CacheError::storage("disk full");
/// assert_eq!(e.to_string(), "the node cache failed: disk full");
/// ```
#[derive(Clone, Debug, thiserror::Error)]
pub enum CacheError {
    /// A stored entry fails its integrity check or does not decode.
    #[error("the cached result of {key} is damaged ({source}); it is ignored and replaced by the node's next result")]
    Damaged {
        /// The entry.
        key: CacheKey,
        /// What is wrong with it.
        #[source]
        source: FrameError,
    },
    /// An entry could not be encoded for storage.
    #[error("the result of {key} cannot be cached: {source}")]
    Encode {
        /// The entry.
        key: CacheKey,
        /// Why.
        #[source]
        source: FrameError,
    },
    /// The cache's storage failed (disk, lock, connection), in its own words.
    #[error("the node cache failed: {0}")]
    Storage(String),
}

impl CacheError {
    /// A backend's own failure, in its own words.
    pub fn storage(e: impl std::fmt::Display) -> Self {
        CacheError::Storage(e.to_string())
    }
}

/// Where cached node results live, shared by every thread and run that uses it.
///
/// A backend stores the bytes of [`encode_entry`] and gives them back through [`decode_entry`],
/// so a damaged entry is [`CacheError::Damaged`], never another value. `put` returns once the
/// entry is durable (for an on-disk backend).
///
/// ```
/// use stategraph_checkpoint::{CacheEntry, CacheKey, MemoryCache, NodeCache};
/// # futures::executor::block_on(async {
/// let cache = MemoryCache::new();
/// let key = CacheKey::new("g", "fetch", "k1");
/// let raw = serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap();
/// cache.put(&key, &CacheEntry::new(raw, 0, None)).await.unwrap();
/// assert!(cache.get(&key).await.unwrap().is_some());
/// assert_eq!(cache.clear(Some("g"), Some("fetch")).await.unwrap(), 1);
/// # });
/// ```
#[async_trait]
pub trait NodeCache: Send + Sync + 'static {
    /// The entry stored under `key`, expired or not (the caller judges expiry).
    async fn get(&self, key: &CacheKey) -> Result<Option<CacheEntry>, CacheError>;

    /// Stores `entry` under `key`, replacing what was there.
    async fn put(&self, key: &CacheKey, entry: &CacheEntry) -> Result<(), CacheError>;

    /// Removes the entries of `graph` (every graph's when `None`), of `node` only when given.
    /// Returns how many it removed.
    async fn clear(&self, graph: Option<&str>, node: Option<&str>) -> Result<u64, CacheError>;
}

impl std::fmt::Debug for dyn NodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCache")
    }
}

/// The stored form of `entry`: checksummed JSON in the records' framing.
///
/// ```
/// use stategraph_checkpoint::{decode_entry, encode_entry, CacheEntry, CacheError, CacheKey};
/// let key = CacheKey::new("g", "fetch", "k");
/// let raw = serde_json::value::to_raw_value(&1).unwrap();
/// let mut bytes = encode_entry(&key, &CacheEntry::new(raw, 0, None)).unwrap();
/// assert_eq!(decode_entry(&key, &bytes).unwrap().value.get(), "1");
/// let last = bytes.len() - 1;
/// bytes[last] ^= 1;
/// assert!(matches!(decode_entry(&key, &bytes), Err(CacheError::Damaged { .. })));
/// ```
pub fn encode_entry(key: &CacheKey, entry: &CacheEntry) -> Result<Vec<u8>, CacheError> {
    codec::encode(entry).map_err(|source| CacheError::Encode {
        key: key.clone(),
        source,
    })
}

/// Reads back what [`encode_entry`] stored; damage is [`CacheError::Damaged`].
pub fn decode_entry(key: &CacheKey, bytes: &[u8]) -> Result<CacheEntry, CacheError> {
    codec::decode(bytes).map_err(|source| CacheError::Damaged {
        key: key.clone(),
        source,
    })
}

/// The default key of a node's input: a BLAKE3 hash of the node's name and the input's JSON,
/// in hex. Equal inputs give equal keys in every process.
///
/// ```
/// use stategraph_checkpoint::default_cache_key;
/// let a = default_cache_key("fetch", br#"{"q":"rust"}"#);
/// assert_eq!(a, default_cache_key("fetch", br#"{"q":"rust"}"#));
/// assert_ne!(a, default_cache_key("other", br#"{"q":"rust"}"#));
/// ```
pub fn default_cache_key(node: &str, input_json: &[u8]) -> String {
    let mut hasher = blake3::Hasher::new();
    // The name's length first, so no name and input can run into another pair's.
    hasher.update(&(node.len() as u64).to_le_bytes());
    hasher.update(node.as_bytes());
    hasher.update(input_json);
    hasher.finalize().to_hex().to_string()
}

/// Cached results in memory, shared by the runs of one process (clone the `Arc`).
///
/// ```
/// use std::sync::Arc;
/// use stategraph_checkpoint::{MemoryCache, NodeCache};
/// let cache: Arc<dyn NodeCache> = Arc::new(MemoryCache::new());
/// # let _ = cache;
/// ```
#[derive(Default)]
pub struct MemoryCache {
    entries: Mutex<BTreeMap<CacheKey, Vec<u8>>>,
}

impl MemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<CacheKey, Vec<u8>>> {
        // A panic while holding the lock leaves whole entries behind: each call is one insert.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `f` to the stored bytes of `key`. For tests of damage handling.
    #[doc(hidden)]
    pub fn tamper(&self, key: &CacheKey, f: impl FnOnce(&mut Vec<u8>)) {
        if let Some(bytes) = self.lock().get_mut(key) {
            f(bytes);
        }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[async_trait]
impl NodeCache for MemoryCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<CacheEntry>, CacheError> {
        let bytes = self.lock().get(key).cloned();
        bytes.map(|b| decode_entry(key, &b)).transpose()
    }

    async fn put(&self, key: &CacheKey, entry: &CacheEntry) -> Result<(), CacheError> {
        let bytes = encode_entry(key, entry)?;
        self.lock().insert(key.clone(), bytes);
        Ok(())
    }

    async fn clear(&self, graph: Option<&str>, node: Option<&str>) -> Result<u64, CacheError> {
        let mut entries = self.lock();
        let before = entries.len();
        entries.retain(|k, _| {
            !(graph.is_none_or(|g| k.graph == g) && node.is_none_or(|n| k.node == n))
        });
        Ok((before - entries.len()) as u64)
    }
}
