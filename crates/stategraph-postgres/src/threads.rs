//! Whole threads: listing them, deleting one with its subgraphs, and pruning checkpoints with
//! their writes, journal entries and the pieces nothing names any more.
//!
//! A subgraph's records are keyed `{root}/{namespace}` (the checkpoint crate's convention): they
//! are listed with no thread of their own, and go with their root. Both deletes hold the root's
//! row exclusively, after the fence, so no write of the tree runs meanwhile.

use crate::keys::ThreadKeys;
use crate::pieces::{self, NewPieces};
use crate::transaction::{pipelined, stmt, Failed, Lock};
use crate::PostgresCheckpointer;
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::{CheckpointError, CheckpointId};

/// Root threads with at least one checkpoint, in byte order (as the other stores list them).
const LIST_THREADS: &str = "SELECT t.thread FROM stategraph_threads t
    WHERE t.thread_key = t.root_key
      AND EXISTS (SELECT 1 FROM stategraph_checkpoints c WHERE c.thread_key = t.thread_key)
    ORDER BY t.thread COLLATE \"C\"";

/// A thread's subgraph namespaces with at least one checkpoint: $1 its root's key, $2 its id
/// and a separator.
const LIST_NAMESPACES: &str = "SELECT t.thread FROM stategraph_threads t
    WHERE t.root_key = $1 AND starts_with(t.thread, $2)
      AND EXISTS (SELECT 1 FROM stategraph_checkpoints c WHERE c.thread_key = t.thread_key)
    ORDER BY t.thread COLLATE \"C\"";

// A thread and its subgraphs: $1 its root's key, $2 its key, $3 its id and a separator.
const DELETE_THREAD: [&str; 5] = [
    "DELETE FROM stategraph_checkpoints WHERE thread_key IN (SELECT thread_key FROM \
     stategraph_threads WHERE root_key = $1 AND (thread_key = $2 OR starts_with(thread, $3)))",
    "DELETE FROM stategraph_writes WHERE thread_key IN (SELECT thread_key FROM \
     stategraph_threads WHERE root_key = $1 AND (thread_key = $2 OR starts_with(thread, $3)))",
    "DELETE FROM stategraph_journal WHERE thread_key IN (SELECT thread_key FROM \
     stategraph_threads WHERE root_key = $1 AND (thread_key = $2 OR starts_with(thread, $3)))",
    "DELETE FROM stategraph_pieces WHERE thread_key IN (SELECT thread_key FROM \
     stategraph_threads WHERE root_key = $1 AND (thread_key = $2 OR starts_with(thread, $3)))",
    // Last: the rows (and the lease with them) the statements above looked the keys up in.
    "DELETE FROM stategraph_threads \
     WHERE root_key = $1 AND (thread_key = $2 OR starts_with(thread, $3))",
];

const DELETE_CHECKPOINTS: &str = "DELETE FROM stategraph_checkpoints
    WHERE thread_key = $1 AND id = ANY($2) RETURNING names_pieces";
const DELETE_WRITES: &str = "DELETE FROM stategraph_writes
    WHERE thread_key = $1 AND checkpoint = ANY($2) RETURNING names_pieces";
/// A node's recorded calls go with the checkpoint they were made from.
const DELETE_CALLS: &str =
    "DELETE FROM stategraph_journal WHERE thread_key = $1 AND checkpoint = ANY($2)";

impl PostgresCheckpointer {
    pub(crate) async fn thread_ids(&self) -> Result<Vec<String>, CheckpointError> {
        let client = self.client().await?;
        let rows = async {
            let statement = client.prepare_cached(LIST_THREADS).await?;
            client.query(&statement, &[]).await
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(|e| self.target.query_error(&e)))
            .collect()
    }

    pub(crate) async fn namespaces_of(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let root = ThreadKeys::of(thread).root;
        let below = format!("{thread}/");
        let client = self.client().await?;
        let rows = async {
            let statement = client.prepare_cached(LIST_NAMESPACES).await?;
            client.query(&statement, &[&root, &below]).await
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(|e| self.target.query_error(&e)))
            .collect()
    }

    pub(crate) async fn remove_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        let keys = ThreadKeys::of(thread);
        let below = format!("{thread}/");
        let stmts = DELETE_THREAD
            .iter()
            .map(|sql| stmt!(*sql, keys.root.clone(), keys.key.clone(), below.clone()))
            .collect();
        self.write(
            thread,
            &keys,
            true,
            Lock::Exclusive,
            NewPieces::default(),
            stmts,
        )
        .await?;
        // Its lease went with its row.
        self.held.forget(thread);
        Ok(())
    }

    pub(crate) async fn remove_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        if ids.is_empty() {
            return Ok(());
        }
        let keys = ThreadKeys::of(thread);
        match self.prune_in_transaction(thread, &keys, ids).await {
            Ok(()) => Ok(()),
            Err(failed) => Err(self.failed(thread, failed).await),
        }
    }

    async fn prune_in_transaction(
        &self,
        thread: &str,
        keys: &ThreadKeys,
        ids: &[CheckpointId],
    ) -> Result<(), Failed> {
        let ids = ids.to_vec();
        let stmts = [
            self.fence(thread, keys, Lock::Exclusive),
            stmt!(DELETE_CHECKPOINTS, keys.key.clone(), ids.clone()),
            stmt!(DELETE_WRITES, keys.key.clone(), ids.clone()),
            stmt!(DELETE_CALLS, keys.key.clone(), ids),
        ];
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let answers = pipelined(&tx, &stmts).await?;
        // A record that named pieces, or whose flag does not read, may leave some unnamed.
        let removed_pieces = answers
            .iter()
            .skip(1)
            .take(2)
            .flatten()
            .any(|row| row.try_get::<_, bool>(0).unwrap_or(true));
        if removed_pieces {
            pieces::sweep(&tx, thread, &keys.key).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
