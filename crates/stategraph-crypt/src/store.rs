//! [`EncryptedStore`]: any long-term [`Store`], with every item's value sealed before it reaches
//! the backend, and [`rekey_items`], which seals a store's items again under the current key.
//!
//! What is sealed and what stays clear: an item's *value* is sealed (one segment, in an
//! [`Envelope`] that takes the value's place) and bound to its namespace and key, so a value
//! copied to another item does not open ([`SealFault::Tampered`]). Its namespace, key, times
//! and TTL stay in the clear: the backend lists namespaces, selects by namespace prefix, orders
//! by update time and expires items by them.
//!
//! What that costs the backend: it cannot look inside a sealed value, so a search with field
//! filters asks it for everything under the namespace prefix, opens those items here and
//! filters and pages them in memory (a search without filters is paged by the backend as
//! before). A text query is not answered here ([`StoreError::NeedsIndex`]): put
//! `stategraph_store::IndexedStore` *above* an `EncryptedStore`, so its index is built from
//! opened values and lives in memory only; below it, it would index sealed text.
//!
//! Not detected: a value put back to an older sealed value of the same item (a rollback by
//! someone with write access to the backend), and changed times or TTLs, which are clear.

use crate::cipher::{Binding, Cipher, OpenError};
use crate::envelope::Envelope;
use crate::keys::Keyring;
use async_trait::async_trait;
use stategraph_checkpoint::store::{
    filter_matches, page, refresh_page, Item, Namespace, NamespaceQuery, SearchHit, SearchRequest,
    Store, StoreError, StoreOp,
};
use stategraph_checkpoint::SealFault;
use std::sync::Arc;

/// The kind of record a store item's value is sealed as (see [`Binding`]).
const KIND: &str = "item";

/// A long-term store whose items' values are sealed on their way in and opened on their way
/// out (see the module doc for what stays clear and how searches run).
///
/// With no key configured ([`Keyring::none`]) it writes plaintext and turns any sealed item it
/// reads into a clear error naming the item and the key it needs. With keys, a plaintext item
/// read is refused ([`SealFault::NotSealed`]) unless [`reading_plaintext`](Self::reading_plaintext)
/// allows it (turning encryption on for a store, until [`rekey_items`] has sealed it).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{MemoryStore, Store};
/// use stategraph_crypt::{EncryptedStore, Key, Keyring};
/// let backend = Arc::new(MemoryStore::new());
/// let keys = Keyring::new(vec![Key::new("2026-12", [7; 32])?])?;
/// let store = EncryptedStore::new(backend.clone(), keys);
/// store.put(&["users", "ada"], "home", serde_json::json!("12 Rue Lamarck")).await?;
/// let ns = vec!["users".to_string(), "ada".to_string()];
/// assert_eq!(store.get(&ns, "home").await?.unwrap().value, "12 Rue Lamarck");
/// // The backend holds only the sealed value.
/// let stored = backend.get(&ns, "home").await?.unwrap();
/// assert!(!stored.value.to_string().contains("Lamarck"));
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub struct EncryptedStore {
    inner: Arc<dyn Store>,
    cipher: Cipher,
    read_plaintext: bool,
}

/// What [`rekey_items`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ItemsRekeyReport {
    /// Items sealed again under the current key (plaintext ones included).
    pub resealed: usize,
    /// Items already under the current key, left alone.
    pub current: usize,
}

impl EncryptedStore {
    /// Seals what goes to `inner` with `keys` (the first seals; all open).
    pub fn new(inner: Arc<dyn Store>, keys: Keyring) -> Self {
        EncryptedStore {
            inner,
            cipher: Cipher::new(keys),
            read_plaintext: false,
        }
    }

    /// Reads plaintext items too (a store written before encryption was on).
    pub fn reading_plaintext(mut self, yes: bool) -> Self {
        self.read_plaintext = yes;
        self
    }

    /// The store the sealed items go to.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    /// The keys.
    pub fn keyring(&self) -> &Keyring {
        self.cipher.keyring()
    }

    fn sealing(&self) -> bool {
        !self.cipher.keyring().is_empty()
    }

    /// `op` as the backend stores it: a put's value sealed (when a key is configured).
    fn seal_op(&self, op: &StoreOp) -> Result<StoreOp, StoreError> {
        let StoreOp::Put {
            namespace,
            key,
            value,
            ttl_ms,
        } = op
        else {
            return Ok(op.clone());
        };
        if !self.sealing() {
            return Ok(op.clone());
        }
        Ok(StoreOp::Put {
            namespace: namespace.clone(),
            key: key.clone(),
            value: self.seal_value(namespace, key, value)?,
            ttl_ms: *ttl_ms,
        })
    }

    fn seal_value(
        &self,
        namespace: &[String],
        key: &str,
        value: &serde_json::Value,
    ) -> Result<serde_json::Value, StoreError> {
        let joined = namespace.join("/");
        let plain = serde_json::to_vec(value)
            .map_err(|e| StoreError::Backend(format!("item `{key}` in `{joined}`: {e}")))?;
        let segment = self
            .cipher
            .seal(binding(&joined, key), &plain)
            .map_err(|_| sealed(&joined, key, SealFault::KeyMissing, no_key_detail()))?;
        Ok(Envelope::one(segment).to_value())
    }

    /// A stored item with its value opened.
    fn open(&self, mut item: Item) -> Result<Item, StoreError> {
        let joined = item.namespace.join("/");
        let Some(env) = Envelope::from_value(&item.value) else {
            if self.sealing() && !self.read_plaintext {
                return Err(sealed(
                    &joined,
                    &item.key,
                    SealFault::NotSealed,
                    NOT_SEALED.into(),
                ));
            }
            return Ok(item);
        };
        let fault = |e| open_fault(&joined, &item.key, e);
        let [segment] = env.segments.as_slice() else {
            return Err(fault(OpenError::Tampered {
                reason: format!("it holds {} sealed parts where 1 is", env.segments.len()),
            }));
        };
        let plain = self
            .cipher
            .open(binding(&joined, &item.key), segment)
            .map_err(fault)?;
        item.value = serde_json::from_slice(&plain).map_err(|e| {
            fault(OpenError::Tampered {
                reason: format!("it opens to what is not JSON: {e}"),
            })
        })?;
        Ok(item)
    }

    fn open_hits(&self, hits: Vec<SearchHit>) -> Result<Vec<SearchHit>, StoreError> {
        hits.into_iter()
            .map(|hit| {
                Ok(SearchHit {
                    item: self.open(hit.item)?,
                    score: hit.score,
                })
            })
            .collect()
    }
}

fn binding<'a>(namespace: &'a str, key: &'a str) -> Binding<'a> {
    Binding {
        thread: namespace,
        kind: KIND,
        place: key,
    }
}

fn sealed(namespace: &str, key: &str, fault: SealFault, detail: String) -> StoreError {
    StoreError::Sealed {
        namespace: namespace.to_string(),
        key: key.to_string(),
        fault,
        detail: detail.into(),
    }
}

fn no_key_detail() -> String {
    "no encryption key is configured to encrypt it".into()
}

const NOT_SEALED: &str = "it is stored unencrypted while encryption is on; it is not read, as \
     anyone with access to the store could have put it there. Seal the store's items under the \
     current key (rekey, which reads unencrypted items) to read it";

/// The error for an item that does not open, as `records::fault` says it for a thread's records.
fn open_fault(namespace: &str, key: &str, e: OpenError) -> StoreError {
    let (fault, detail) = match e {
        OpenError::KeyMissing { key_id } => (
            SealFault::KeyMissing,
            format!(
                "it is encrypted with key `{key_id}`, which is not among the configured \
                 encryption keys; configure that key (beside the current one) to read it"
            ),
        ),
        OpenError::WrongKey { key_id } => (
            SealFault::WrongKey,
            format!(
                "it is encrypted with key `{key_id}`, and the key configured under that id is a \
                 different key; configure the key that was used then"
            ),
        ),
        OpenError::Tampered { reason } => (
            SealFault::Tampered,
            format!(
                "it was altered after it was encrypted, or moved from another item ({reason}); \
                 it is not read. Delete it and put it again"
            ),
        ),
    };
    sealed(namespace, key, fault, detail)
}

#[async_trait]
impl Store for EncryptedStore {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        let sealed = ops
            .iter()
            .map(|op| self.seal_op(op))
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.batch(&sealed).await
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.inner
            .get(namespace, key)
            .await?
            .map(|item| self.open(item))
            .transpose()
    }

    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        self.inner
            .get_with(namespace, key, refresh_ttl)
            .await?
            .map(|item| self.open(item))
            .transpose()
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        if request.query.is_some() {
            return Err(StoreError::NeedsIndex);
        }
        if request.filter.is_empty() {
            // Prefix, order and paging need no value: the backend pages (and refreshes).
            let hits = self.inner.search(request).await?;
            return self.open_hits(hits);
        }
        let everything = SearchRequest {
            filter: Default::default(),
            limit: 0,
            offset: 0,
            refresh_ttl: Some(false),
            ..request.clone()
        };
        let opened = self.open_hits(self.inner.search(&everything).await?)?;
        let matching: Vec<Item> = opened
            .into_iter()
            .map(|hit| hit.item)
            .filter(|item| filter_matches(&item.value, &request.filter))
            .collect();
        let hits = page(matching, request.offset, request.limit);
        refresh_page(self.inner.as_ref(), hits, request.refresh_ttl).await
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        self.inner.list_namespaces(query).await
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        self.inner.sweep_expired().await
    }
}

/// Seals every live item of `store` again under its current key: items sealed under older
/// configured keys, and plaintext ones (whatever [`EncryptedStore::reading_plaintext`] says:
/// sealing them is the point). Items already under the current key are left alone, so running
/// it again after an interruption finishes the job.
///
/// Each item is put again through the store's contract: its value and creation time are kept,
/// its update time becomes now, and an item with a TTL keeps the moment it expires (it is put
/// with what remains of it, which a later refreshing read restarts). Nothing may write the
/// items meanwhile: a put between the read and the rewrite would be undone.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{MemoryStore, Store};
/// use stategraph_crypt::{rekey_items, EncryptedStore, Key, Keyring};
/// let backend = Arc::new(MemoryStore::new());
/// let old = Key::new("old", [1; 32])?;
/// EncryptedStore::new(backend.clone(), Keyring::new(vec![old.clone()])?)
///     .put(&["notes"], "1", "a secret".into()).await?;
/// let both = Keyring::new(vec![Key::new("new", [2; 32])?, old])?;
/// let report = rekey_items(&EncryptedStore::new(backend, both)).await?;
/// assert_eq!((report.resealed, report.current), (1, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub async fn rekey_items(store: &EncryptedStore) -> Result<ItemsRekeyReport, StoreError> {
    let Some(current) = store.keyring().current().map(|k| k.id().to_string()) else {
        return Err(StoreError::Sealed {
            namespace: String::new(),
            key: String::new(),
            fault: SealFault::KeyMissing,
            detail: "no encryption key is configured to seal the store's items under".into(),
        });
    };
    let everything = SearchRequest {
        refresh_ttl: Some(false),
        ..SearchRequest::default()
    };
    let reader = EncryptedStore {
        inner: store.inner.clone(),
        cipher: store.cipher.clone(),
        read_plaintext: true,
    };
    let mut report = ItemsRekeyReport::default();
    let now = stategraph_checkpoint::now_ms();
    for hit in store.inner.search(&everything).await? {
        let stored = hit.item;
        let env = Envelope::from_value(&stored.value);
        if env.as_ref().and_then(|e| e.key_id()) == Some(current.as_str()) {
            report.current += 1;
            continue;
        }
        let item = reader.open(stored)?;
        let ttl_ms = item.expires_at_ms.map(|at| at.saturating_sub(now).max(1));
        let op = StoreOp::Put {
            namespace: item.namespace,
            key: item.key,
            value: item.value,
            ttl_ms,
        };
        store.batch(&[op]).await?;
        report.resealed += 1;
    }
    Ok(report)
}
