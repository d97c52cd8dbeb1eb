//! [`SledCache`]: the node cache of a store, in a sled directory of its own beside the threads
//! (`<root>/cache/` for the `graph` command's folder store).
//!
//! Every process of a store shares one cache, and sled lets one process open a directory at a
//! time: so the cache is opened for each operation and closed after it, and an operation that
//! finds it held by another process waits for it a moment. An open costs a few milliseconds,
//! paid only by nodes that cache, which are the expensive ones. Entries are flushed before `put`
//! returns. A damaged entry is reported as [`CacheError::Damaged`], which the engine logs and
//! treats as a miss.

use async_trait::async_trait;
use stategraph_checkpoint::{
    decode_entry, encode_entry, CacheEntry, CacheError, CacheKey, NodeCache,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an operation waits for another process to let the cache go.
const WAIT_FOR_LOCK: Duration = Duration::from_secs(5);

/// Cached node results in a sled directory, shared by every process of a store.
///
/// ```no_run
/// use std::sync::Arc;
/// use stategraph_checkpoint::NodeCache;
/// use stategraph_sled::SledCache;
/// let cache: Arc<dyn NodeCache> = Arc::new(SledCache::new("/var/lib/stategraph/cache"));
/// # let _ = cache;
/// ```
#[derive(Debug)]
pub struct SledCache {
    dir: PathBuf,
    /// One operation of this process at a time: each opens the directory, and sled refuses a
    /// second open while one is in use.
    busy: tokio::sync::Mutex<()>,
}

/// Entry keys: graph, node and key, each ended by a NUL (names hold none), so a graph's or a
/// node's entries are one prefix.
fn entry_key(key: &CacheKey) -> Vec<u8> {
    let mut out = prefix(Some(&key.graph), Some(&key.node));
    out.extend_from_slice(key.key.as_bytes());
    out
}

fn prefix(graph: Option<&str>, node: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(g) = graph {
        out.extend_from_slice(g.as_bytes());
        out.push(0);
        if let Some(n) = node {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
    }
    out
}

/// The node of a stored entry key.
fn node_of(key: &[u8]) -> Option<&[u8]> {
    let mut parts = key.splitn(3, |b| *b == 0);
    parts.next()?;
    parts.next()
}

impl SledCache {
    /// The cache in directory `dir` (made on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SledCache {
            dir: dir.into(),
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// The cache of the folder store at `root` (`<root>/cache`), as the `graph` command keeps it.
    ///
    /// ```
    /// use stategraph_sled::SledCache;
    /// let cache = SledCache::of_store("/var/lib/stategraph");
    /// assert!(cache.dir().ends_with("cache"));
    /// ```
    pub fn of_store(root: impl AsRef<Path>) -> Self {
        Self::new(root.as_ref().join("cache"))
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `f` on the open cache, off the async threads.
    async fn with_db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&sled::Db) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, CacheError> {
        let _one = self.busy.lock().await;
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || {
            let db = open(&dir)?;
            f(&db)
        })
        .await
        .map_err(CacheError::storage)?
    }
}

/// Opens the directory, waiting a moment for another process that holds it.
fn open(dir: &Path) -> Result<sled::Db, CacheError> {
    let give_up = Instant::now() + WAIT_FOR_LOCK;
    loop {
        match sled::Config::new().path(dir).open() {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io))
                if io.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < give_up =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(CacheError::Storage(format!(
                    "cannot open the node cache at {}: {e}",
                    dir.display()
                )))
            }
        }
    }
}

#[async_trait]
impl NodeCache for SledCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<CacheEntry>, CacheError> {
        // A read never writes: a cache that was never made is empty, not made here.
        if !self.dir.exists() {
            return Ok(None);
        }
        let key = key.clone();
        self.with_db(move |db| {
            let bytes = db.get(entry_key(&key)).map_err(CacheError::storage)?;
            bytes.map(|b| decode_entry(&key, &b)).transpose()
        })
        .await
    }

    async fn put(&self, key: &CacheKey, entry: &CacheEntry) -> Result<(), CacheError> {
        let bytes = encode_entry(key, entry)?;
        let at = entry_key(key);
        self.with_db(move |db| {
            db.insert(at, bytes).map_err(CacheError::storage)?;
            db.flush().map_err(CacheError::storage)?;
            Ok(())
        })
        .await
    }

    async fn clear(&self, graph: Option<&str>, node: Option<&str>) -> Result<u64, CacheError> {
        if !self.dir.exists() {
            return Ok(0);
        }
        let start = prefix(graph, node);
        let node = node.map(|n| n.as_bytes().to_vec());
        // Every graph's entries of one node: no single prefix holds them.
        let filter_node = graph.is_none();
        self.with_db(move |db| {
            let mut removed = 0u64;
            for item in db.scan_prefix(&start).keys() {
                let k = item.map_err(CacheError::storage)?;
                if filter_node {
                    if let Some(n) = &node {
                        if node_of(&k) != Some(n.as_slice()) {
                            continue;
                        }
                    }
                }
                db.remove(&k).map_err(CacheError::storage)?;
                removed += 1;
            }
            db.flush().map_err(CacheError::storage)?;
            Ok(removed)
        })
        .await
    }
}

/// Flips a byte of each stored entry. For tests of damage handling.
#[doc(hidden)]
pub fn tamper_cache_entries(dir: &Path) -> Result<usize, CacheError> {
    let db = open(dir)?;
    let mut n = 0;
    for item in db.iter() {
        let (k, v) = item.map_err(CacheError::storage)?;
        let mut v = v.to_vec();
        if let Some(last) = v.last_mut() {
            *last ^= 0x55;
        }
        db.insert(k, v).map_err(CacheError::storage)?;
        n += 1;
    }
    db.flush().map_err(CacheError::storage)?;
    Ok(n)
}
