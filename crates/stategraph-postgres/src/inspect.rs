//! What tests read and damage beyond the contract: the bytes a thread occupies, and hooks that
//! rewrite stored bytes (the conformance kit's proof that damage is reported, never read as an
//! older or empty state). They are for tests; a program has no use for them.

use crate::keys::ThreadKeys;
use crate::PostgresCheckpointer;
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::{CheckpointError, CheckpointId};

const STORED_BYTES: &str = "SELECT (
      COALESCE((SELECT sum(16 + octet_length(record)) FROM stategraph_checkpoints
                WHERE thread_key = $1), 0)
    + COALESCE((SELECT sum(16 + octet_length(record)) FROM stategraph_writes
                WHERE thread_key = $1), 0)
    + COALESCE((SELECT sum(16 + octet_length(bytes)) FROM stategraph_pieces
                WHERE thread_key = $1), 0))::bigint";

impl PostgresCheckpointer {
    /// Bytes the thread's checkpoints, pending writes and pieces hold, 16 more for each (their
    /// key), counted as the memory store counts them; Postgres may compress them on disk.
    #[doc(hidden)]
    pub async fn stored_bytes(&self, thread: &str) -> Result<u64, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let bytes: i64 = async {
            let statement = client.prepare_cached(STORED_BYTES).await?;
            client.query_one(&statement, &[&key]).await?.try_get(0)
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    /// Rewrites the stored bytes of one checkpoint. For tests of damage handling.
    #[doc(hidden)]
    pub async fn tamper(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        damage: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let fail = |e: tokio_postgres::Error| self.target.query_error(&e);
        let row = client
            .query_opt(
                "SELECT record FROM stategraph_checkpoints WHERE thread_key = $1 AND id = $2",
                &[&key, &checkpoint],
            )
            .await
            .map_err(fail)?;
        let Some(row) = row else {
            return Ok(());
        };
        let mut bytes: Vec<u8> = row.try_get(0).map_err(fail)?;
        damage(&mut bytes);
        client
            .execute(
                "UPDATE stategraph_checkpoints SET record = $3 WHERE thread_key = $1 AND id = $2",
                &[&key, &checkpoint, &bytes],
            )
            .await
            .map_err(fail)?;
        Ok(())
    }

    /// Rewrites every stored piece of the thread. For tests of damage handling.
    #[doc(hidden)]
    pub async fn tamper_pieces(
        &self,
        thread: &str,
        mut damage: impl FnMut(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let fail = |e: tokio_postgres::Error| self.target.query_error(&e);
        let rows = client
            .query(
                "SELECT hash, bytes FROM stategraph_pieces WHERE thread_key = $1",
                &[&key],
            )
            .await
            .map_err(fail)?;
        for row in rows {
            let hash: Vec<u8> = row.try_get(0).map_err(fail)?;
            let mut bytes: Vec<u8> = row.try_get(1).map_err(fail)?;
            damage(&mut bytes);
            client
                .execute(
                    "UPDATE stategraph_pieces SET bytes = $3 WHERE thread_key = $1 AND hash = $2",
                    &[&key, &hash, &bytes],
                )
                .await
                .map_err(fail)?;
        }
        Ok(())
    }
}
