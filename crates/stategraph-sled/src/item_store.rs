//! [`SledStore`]: the long-term store ([`Store`]) in a sled directory of its own, beside a
//! folder store's threads (`<db>/items/`, see [`SledStore::beside`]).
//!
//! Key layout: the namespace's labels joined by `\x1f`, then `\x1e`, then the key, so one
//! namespace's items, and a namespace prefix's, are one range of the tree. Each value is the
//! item framed by the checkpoint codec, so a damaged item is reported, never read as absent.

use async_trait::async_trait;
use stategraph_checkpoint::codec;
use stategraph_checkpoint::store::{
    filter_matches, namespace_matches, page, select_namespaces, Clock, Item, Namespace,
    NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp, SystemClock, TtlConfig,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LABEL_END: u8 = 0x1f;
const KEY_START: u8 = 0x1e;
/// The folder of a folder store that holds its long-term store.
const BESIDE: &str = "items";

/// The long-term store in a sled directory.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use stategraph_checkpoint::store::Store;
/// let dir = tempfile::tempdir().unwrap();
/// let store = stategraph_sled::SledStore::open(dir.path().join("items"))?;
/// store.put(&["users", "ada"], "lang", serde_json::json!("Rust")).await?;
/// assert!(store.get(&["users".into(), "ada".into()], "lang").await?.is_some());
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SledStore {
    db: sled::Db,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    ttl: TtlConfig,
}

impl SledStore {
    /// Opens (or creates) the store at `path`, on the system clock.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with_clock(path, Arc::new(SystemClock))
    }

    /// The store of the folder store (`FolderCheckpointer`) at `db`: `<db>/items/`.
    pub fn beside(db: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open(db.as_ref().join(BESIDE))
    }

    /// Opens the store at `path` with TTLs on `clock`.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        Self::open_waiting(path, clock, Duration::ZERO)
    }

    /// Opens the store at `path`, waiting up to `wait` while another process has it open
    /// (sled lets one process at a time open a directory).
    pub fn open_waiting(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
        wait: Duration,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let deadline = Instant::now() + wait;
        loop {
            match sled::Config::new().path(&path).open() {
                Ok(db) => {
                    return Ok(SledStore {
                        db,
                        path,
                        clock,
                        ttl: TtlConfig::default(),
                    })
                }
                Err(e) if is_locked(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if is_locked(&e) => {
                    return Err(StoreError::Locked {
                        path: path.display().to_string(),
                    })
                }
                Err(e) => {
                    return Err(StoreError::Backend(format!(
                        "cannot open the long-term store at {}: {e}",
                        path.display()
                    )));
                }
            }
        }
    }

    /// The same store with a default TTL and refresh-on-read setting (see [`TtlConfig`]).
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Writes the new expiry of the live items just read, when the read refreshes; returns
    /// them as they now are. An item replaced or deleted since it was read is left alone
    /// (compare-and-swap): a refresh never brings back an old value.
    async fn refresh(&self, found: Vec<Item>, now: u64) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::with_capacity(found.len());
        let mut wrote = false;
        for item in found {
            let Some(fresh) = item.refreshed_at(now) else {
                out.push(item);
                continue;
            };
            let id = item_key(&item.namespace, &item.key);
            let encode = |i: &Item| {
                codec::encode(i).map_err(|source| StoreError::Corrupt {
                    namespace: i.namespace.join("/"),
                    key: i.key.clone(),
                    source,
                })
            };
            let (old, new) = (encode(&item)?, encode(&fresh)?);
            let swapped = self
                .db
                .compare_and_swap(&id, Some(old), Some(new))
                .map_err(|e| self.failed(e))?;
            wrote |= swapped.is_ok();
            out.push(if swapped.is_ok() { fresh } else { item });
        }
        if wrote {
            self.flush().await?;
        }
        Ok(out)
    }

    /// Where it lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes what is in memory to disk.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.db
            .flush_async()
            .await
            .map(|_| ())
            .map_err(|e| self.failed(e))
    }

    fn failed(&self, e: sled::Error) -> StoreError {
        StoreError::Backend(format!("{}: {e}", self.path.display()))
    }

    /// Every item under `prefix` (expired ones too), decoded.
    fn scan(&self, prefix: &[String]) -> Result<Vec<Item>, StoreError> {
        // Only whole labels before the first wildcard narrow the range.
        let fixed: Vec<String> = prefix.iter().take_while(|l| *l != "*").cloned().collect();
        let mut range = Vec::new();
        for label in &fixed {
            range.extend_from_slice(label.as_bytes());
            range.push(LABEL_END);
        }
        let mut items = Vec::new();
        for entry in self.db.scan_prefix(&range) {
            let (key, bytes) = entry.map_err(|e| self.failed(e))?;
            items.push(decode_item(&key, &bytes)?);
        }
        Ok(items)
    }
}

/// Sled's refusal because another process holds the directory's lock (as `open.rs` reads it).
fn is_locked(e: &sled::Error) -> bool {
    match e {
        sled::Error::Io(io) => {
            io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("lock")
        }
        _ => false,
    }
}

fn item_key(namespace: &[String], key: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in namespace {
        out.extend_from_slice(label.as_bytes());
        out.push(LABEL_END);
    }
    out.push(KEY_START);
    out.extend_from_slice(key.as_bytes());
    out
}

fn decode_item(key: &[u8], bytes: &[u8]) -> Result<Item, StoreError> {
    codec::decode::<Item>(bytes).map_err(|source| {
        let text = String::from_utf8_lossy(key);
        let (namespace, key) = text.split_once(KEY_START as char).unwrap_or(("", &text));
        StoreError::Corrupt {
            namespace: namespace
                .trim_end_matches(LABEL_END as char)
                .replace(LABEL_END as char, "/"),
            key: key.to_string(),
            source,
        }
    })
}

#[async_trait]
impl Store for SledStore {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        for op in ops {
            op.validate()?;
        }
        let ops = self.ttl.apply(ops);
        let now = self.clock.now_ms();
        // What each op leaves, computed against the ops before it in the batch.
        let mut after: std::collections::BTreeMap<Vec<u8>, Option<Item>> = Default::default();
        for op in &ops {
            let (namespace, key) = op.target();
            let id = item_key(namespace, key);
            let before = match after.get(&id) {
                Some(seen) => seen.clone(),
                None => match self.db.get(&id).map_err(|e| self.failed(e))? {
                    // A damaged item is replaced by a put, not read: its creation time is lost.
                    Some(bytes) => decode_item(&id, &bytes).ok(),
                    None => None,
                },
            };
            after.insert(id, op.item_after(before.as_ref(), now));
        }
        let mut batch = sled::Batch::default();
        for (id, item) in after {
            match item {
                Some(item) => {
                    let bytes = codec::encode(&item).map_err(|source| StoreError::Corrupt {
                        namespace: item.namespace.join("/"),
                        key: item.key.clone(),
                        source,
                    })?;
                    batch.insert(id, bytes);
                }
                None => batch.remove(id),
            }
        }
        self.db.apply_batch(batch).map_err(|e| self.failed(e))?;
        self.flush().await
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
        let id = item_key(namespace, key);
        let Some(bytes) = self.db.get(&id).map_err(|e| self.failed(e))? else {
            return Ok(None);
        };
        let item = decode_item(&id, &bytes)?;
        let now = self.clock.now_ms();
        if item.expired_at(now) {
            return Ok(None);
        }
        if !self.ttl.refreshes(refresh_ttl) {
            return Ok(Some(item));
        }
        Ok(self.refresh(vec![item], now).await?.pop())
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        if request.query.is_some() {
            return Err(StoreError::NeedsIndex);
        }
        let now = self.clock.now_ms();
        let found = self
            .scan(&request.namespace_prefix)?
            .into_iter()
            .filter(|item| !item.expired_at(now))
            .filter(|item| namespace_matches(&item.namespace, &request.namespace_prefix))
            .filter(|item| filter_matches(&item.value, &request.filter))
            .collect();
        let hits = page(found, request.offset, request.limit);
        if !self.ttl.refreshes(request.refresh_ttl) {
            return Ok(hits);
        }
        let items = hits.into_iter().map(|hit| hit.item).collect();
        Ok(page(self.refresh(items, now).await?, 0, 0))
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        let now = self.clock.now_ms();
        let items = self.scan(&query.prefix)?;
        let live = items
            .iter()
            .filter(|item| !item.expired_at(now))
            .map(|item| &item.namespace);
        Ok(select_namespaces(live, query))
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        let now = self.clock.now_ms();
        let mut batch = sled::Batch::default();
        let mut removed = 0;
        for item in self.scan(&[])? {
            if item.expired_at(now) {
                batch.remove(item_key(&item.namespace, &item.key));
                removed += 1;
            }
        }
        self.db.apply_batch(batch).map_err(|e| self.failed(e))?;
        self.flush().await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::store::FakeClock;

    /// The store's `TtlConfig`: a put without a TTL gets the default one, a plain read
    /// refreshes it (kept across reopening: the refreshed expiry is on disk), and a read that
    /// says `false` does not.
    #[tokio::test]
    async fn ttl_config_defaults_and_refreshes_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(FakeClock::at(10_000));
        let ttl = TtlConfig {
            default_ttl_ms: Some(1_000),
            refresh_on_read: true,
        };
        let ns = vec!["s".to_string()];
        {
            let store = SledStore::open_with_clock(dir.path(), clock.clone())
                .unwrap()
                .with_ttl(ttl);
            store.put(&["s"], "k", 1.into()).await.unwrap();
            store.put(&["s"], "other", 2.into()).await.unwrap();
            clock.advance(800);
            let read = store.get(&ns, "k").await.unwrap().unwrap();
            assert_eq!(read.expires_at_ms, Some(11_800));
            let not = store.get_with(&ns, "other", Some(false)).await.unwrap();
            assert_eq!(not.unwrap().expires_at_ms, Some(11_000));
        }
        clock.advance(800);
        let store = SledStore::open_with_clock(dir.path(), clock).unwrap();
        assert!(
            store.get(&ns, "k").await.unwrap().is_some(),
            "refreshed on disk"
        );
        assert!(store.get(&ns, "other").await.unwrap().is_none());
    }
}
