//! [`PostgresCache`]: the node cache in the database (schema version 3,
//! `stategraph_node_cache`), shared by every process that connects to it, on the
//! checkpointer's pool. Entries are the codec's checksummed bytes; a damaged one is
//! [`CacheError::Damaged`], which the engine logs and treats as a miss. A `put` returns once
//! the row is committed (on disk with the server's default `synchronous_commit`).

use crate::connect::Target;
use crate::keys::hash16;
use crate::PostgresCheckpointer;
use async_trait::async_trait;
use stategraph_checkpoint::{
    decode_entry, encode_entry, CacheEntry, CacheError, CacheKey, NodeCache,
};
use std::sync::Arc;

/// Cached node results in the database of a [`PostgresCheckpointer`].
///
/// ```no_run
/// use std::sync::Arc;
/// use stategraph_checkpoint::NodeCache;
/// use stategraph_postgres::PostgresCheckpointer;
/// # async fn demo() -> Result<(), stategraph_postgres::ConnectError> {
/// let saver = PostgresCheckpointer::connect("postgres://app:secret@db.internal/agents").await?;
/// let cache: Arc<dyn NodeCache> = Arc::new(saver.node_cache());
/// # let _ = cache;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresCache {
    pool: deadpool_postgres::Pool,
    target: Arc<Target>,
}

impl std::fmt::Debug for PostgresCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCache")
            .field("target", &self.target.to_string())
            .finish()
    }
}

impl PostgresCheckpointer {
    /// The node cache of this database, on this handle's pool of connections.
    pub fn node_cache(&self) -> PostgresCache {
        PostgresCache {
            pool: self.pool.clone(),
            target: self.target.clone(),
        }
    }
}

impl PostgresCache {
    async fn client(&self) -> Result<deadpool_postgres::Object, CacheError> {
        self.pool
            .get()
            .await
            .map_err(|e| CacheError::storage(self.target.pool_error(e)))
    }

    fn failed(&self, e: tokio_postgres::Error) -> CacheError {
        CacheError::Storage(format!(
            "the node cache in {}: {}",
            self.target,
            crate::connect::describe(&e)
        ))
    }
}

#[async_trait]
impl NodeCache for PostgresCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<CacheEntry>, CacheError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT entry FROM stategraph_node_cache \
                 WHERE graph = $1 AND node = $2 AND key_hash = $3",
                &[&key.graph, &key.node, &hash16(&key.key)],
            )
            .await
            .map_err(|e| self.failed(e))?;
        row.map(|r| decode_entry(key, r.get::<_, &[u8]>(0)))
            .transpose()
    }

    async fn put(&self, key: &CacheKey, entry: &CacheEntry) -> Result<(), CacheError> {
        let bytes = encode_entry(key, entry)?;
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO stategraph_node_cache (graph, node, key_hash, key, entry) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (graph, node, key_hash) DO UPDATE \
                 SET key = EXCLUDED.key, entry = EXCLUDED.entry, stored_at = now()",
                &[&key.graph, &key.node, &hash16(&key.key), &key.key, &bytes],
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn clear(&self, graph: Option<&str>, node: Option<&str>) -> Result<u64, CacheError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM stategraph_node_cache \
                 WHERE ($1::TEXT IS NULL OR graph = $1) AND ($2::TEXT IS NULL OR node = $2)",
                &[&graph, &node],
            )
            .await
            .map_err(|e| self.failed(e))
    }
}
