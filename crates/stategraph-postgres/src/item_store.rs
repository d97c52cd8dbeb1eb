//! [`PostgresStore`]: the long-term store ([`Store`]) in the database (schema version 4,
//! `stategraph_store_items`), shared by every process that connects to it, on the
//! checkpointer's pool. A batch is one transaction; items are the codec's checksummed bytes,
//! so a damaged one is [`StoreError::Corrupt`], never another value.
//!
//! The namespace prefix selects rows in SQL; field filters, order and paging are applied to
//! those rows by the contract's shared `select` functions, so every backend answers alike.

use crate::connect::Target;
use crate::keys::hash16;
use crate::PostgresCheckpointer;
use async_trait::async_trait;
use stategraph_checkpoint::codec;
use stategraph_checkpoint::store::{
    filter_matches, namespace_matches, page, select_namespaces, Clock, Item, Namespace,
    NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp, SystemClock, TtlConfig,
};
use std::sync::Arc;

/// The longest namespace, joined by `/`: it is part of the primary key, and a btree entry
/// holds about 2.7 KB.
const MAX_NAMESPACE_BYTES: usize = 1024;

/// Long-term items in the database of a [`PostgresCheckpointer`].
///
/// ```no_run
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::Store;
/// use stategraph_postgres::PostgresCheckpointer;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let saver = PostgresCheckpointer::connect("postgres://app:secret@db.internal/agents").await?;
/// let store: Arc<dyn Store> = Arc::new(saver.item_store());
/// store.put(&["users", "ada"], "lang", serde_json::json!("Rust")).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: deadpool_postgres::Pool,
    target: Arc<Target>,
    clock: Arc<dyn Clock>,
    ttl: TtlConfig,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target.to_string())
            .finish()
    }
}

impl PostgresCheckpointer {
    /// The long-term store of this database, on this handle's pool of connections.
    pub fn item_store(&self) -> PostgresStore {
        self.item_store_with_clock(Arc::new(SystemClock))
    }

    /// As [`item_store`](Self::item_store), with TTLs measured on `clock` (tests fake it).
    pub fn item_store_with_clock(&self, clock: Arc<dyn Clock>) -> PostgresStore {
        PostgresStore {
            pool: self.pool.clone(),
            target: self.target.clone(),
            clock,
            ttl: TtlConfig::default(),
        }
    }
}

/// Milliseconds as Postgres's BIGINT.
fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// The same store with a default TTL and refresh-on-read setting (see [`TtlConfig`]).
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Writes the new expiry of the live items just read, when the read refreshes; returns
    /// them as they now are. The row is updated only if it still holds the item read
    /// (compare-and-swap on its bytes): a refresh never brings back an old value.
    async fn refresh(&self, found: Vec<Item>, now: u64) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::with_capacity(found.len());
        let mut client = None;
        for item in found {
            let Some(fresh) = item.refreshed_at(now) else {
                out.push(item);
                continue;
            };
            let joined = item.namespace.join("/");
            let encode = |i: &Item| {
                codec::encode(i).map_err(|source| StoreError::Corrupt {
                    namespace: joined.clone(),
                    key: i.key.clone(),
                    source,
                })
            };
            let (old, new) = (encode(&item)?, encode(&fresh)?);
            if client.is_none() {
                client = Some(self.client().await?);
            }
            let Some(c) = client.as_ref() else {
                continue;
            };
            let updated = c
                .execute(
                    "UPDATE stategraph_store_items SET item = $4, expires_at_ms = $5 \
                     WHERE namespace = $1 AND key_hash = $2 AND item = $3",
                    &[
                        &joined,
                        &hash16(&item.key),
                        &old,
                        &new,
                        &fresh.expires_at_ms.map(ms),
                    ],
                )
                .await
                .map_err(|e| self.failed(e))?;
            out.push(if updated == 1 { fresh } else { item });
        }
        Ok(out)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(self.target.pool_error(e).to_string()))
    }

    fn failed(&self, e: tokio_postgres::Error) -> StoreError {
        StoreError::Backend(format!(
            "the long-term store in {}: {}",
            self.target,
            crate::connect::describe(&e)
        ))
    }

    /// The live items under the namespace prefix's labels before its first wildcard.
    async fn rows_under(&self, prefix: &[String]) -> Result<Vec<Item>, StoreError> {
        let fixed: Vec<&str> = prefix
            .iter()
            .take_while(|l| *l != "*")
            .map(String::as_str)
            .collect();
        let joined = fixed.join("/");
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT namespace, key, item FROM stategraph_store_items \
                 WHERE ($1 = '' OR namespace = $1 OR left(namespace, length($1) + 1) = $1 || '/') \
                 AND (expires_at_ms IS NULL OR expires_at_ms > $2)",
                &[&joined, &ms(self.clock.now_ms())],
            )
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter()
            .map(|row| decode(row.get(0), row.get(1), row.get(2)))
            .collect()
    }
}

fn decode(namespace: &str, key: &str, bytes: &[u8]) -> Result<Item, StoreError> {
    codec::decode::<Item>(bytes).map_err(|source| StoreError::Corrupt {
        namespace: namespace.to_string(),
        key: key.to_string(),
        source,
    })
}

fn check_length(namespace: &[String]) -> Result<String, StoreError> {
    let joined = namespace.join("/");
    if joined.len() > MAX_NAMESPACE_BYTES {
        return Err(StoreError::InvalidNamespace {
            namespace: joined,
            reason: "a namespace of the Postgres store holds at most 1024 bytes",
        });
    }
    Ok(joined)
}

#[async_trait]
impl Store for PostgresStore {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        for op in ops {
            op.validate()?;
            check_length(op.target().0)?;
        }
        let ops = self.ttl.apply(ops);
        let now = self.clock.now_ms();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        for op in &ops {
            let (namespace, key) = op.target();
            let joined = namespace.join("/");
            let hash = hash16(key);
            if matches!(op, StoreOp::Delete { .. }) {
                tx.execute(
                    "DELETE FROM stategraph_store_items WHERE namespace = $1 AND key_hash = $2",
                    &[&joined, &hash],
                )
                .await
                .map_err(|e| self.failed(e))?;
                continue;
            }
            let before = tx
                .query_opt(
                    "SELECT item FROM stategraph_store_items \
                     WHERE namespace = $1 AND key_hash = $2 FOR UPDATE",
                    &[&joined, &hash],
                )
                .await
                .map_err(|e| self.failed(e))?;
            // A damaged item is replaced by a put, not read: its creation time is lost.
            let before = before.and_then(|row| decode(&joined, key, row.get(0)).ok());
            let Some(item) = op.item_after(before.as_ref(), now) else {
                continue;
            };
            let bytes = codec::encode(&item).map_err(|source| StoreError::Corrupt {
                namespace: joined.clone(),
                key: key.to_string(),
                source,
            })?;
            tx.execute(
                "INSERT INTO stategraph_store_items \
                 (namespace, key_hash, key, item, updated_at_ms, expires_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (namespace, key_hash) DO UPDATE SET key = EXCLUDED.key, \
                 item = EXCLUDED.item, updated_at_ms = EXCLUDED.updated_at_ms, \
                 expires_at_ms = EXCLUDED.expires_at_ms",
                &[
                    &joined,
                    &hash,
                    &key,
                    &bytes,
                    &ms(item.updated_at_ms),
                    &item.expires_at_ms.map(ms),
                ],
            )
            .await
            .map_err(|e| self.failed(e))?;
        }
        tx.commit().await.map_err(|e| self.failed(e))
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
        let joined = namespace.join("/");
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT item FROM stategraph_store_items \
                 WHERE namespace = $1 AND key_hash = $2 \
                 AND (expires_at_ms IS NULL OR expires_at_ms > $3)",
                &[&joined, &hash16(key), &ms(now)],
            )
            .await
            .map_err(|e| self.failed(e))?;
        drop(client);
        let item = row.map(|r| decode(&joined, key, r.get(0))).transpose()?;
        match item {
            Some(item) if self.ttl.refreshes(refresh_ttl) => {
                Ok(self.refresh(vec![item], now).await?.pop())
            }
            item => Ok(item),
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        if request.query.is_some() {
            return Err(StoreError::NeedsIndex);
        }
        let found = self
            .rows_under(&request.namespace_prefix)
            .await?
            .into_iter()
            .filter(|item| namespace_matches(&item.namespace, &request.namespace_prefix))
            .filter(|item| filter_matches(&item.value, &request.filter))
            .collect();
        let hits = page(found, request.offset, request.limit);
        if !self.ttl.refreshes(request.refresh_ttl) {
            return Ok(hits);
        }
        let items = hits.into_iter().map(|hit| hit.item).collect();
        Ok(page(self.refresh(items, self.clock.now_ms()).await?, 0, 0))
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        let fixed: Vec<&str> = query
            .prefix
            .iter()
            .take_while(|l| *l != "*")
            .map(String::as_str)
            .collect();
        let joined = fixed.join("/");
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT DISTINCT namespace FROM stategraph_store_items \
                 WHERE ($1 = '' OR namespace = $1 OR left(namespace, length($1) + 1) = $1 || '/') \
                 AND (expires_at_ms IS NULL OR expires_at_ms > $2)",
                &[&joined, &ms(self.clock.now_ms())],
            )
            .await
            .map_err(|e| self.failed(e))?;
        let namespaces: Vec<Namespace> = rows
            .iter()
            .map(|row| {
                row.get::<_, &str>(0)
                    .split('/')
                    .map(str::to_string)
                    .collect()
            })
            .collect();
        Ok(select_namespaces(&namespaces, query))
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let removed = client
            .execute(
                "DELETE FROM stategraph_store_items WHERE expires_at_ms <= $1",
                &[&ms(self.clock.now_ms())],
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }
}
