//! Checkpoints, pending writes and the journal: each record is the codec's checksummed frame,
//! stored as it is in `BYTEA` (a NUL character in a state is data, never a broken JSONB value:
//! LangGraph #1878), so damage is reported as such and never read as an older or empty state.
//!
//! A read that needs no piece is one query. A record that names pieces is read again with its
//! pieces in one snapshot (a read-only repeatable-read transaction), so a prune running at the
//! same time cannot take a piece away between the record and the piece.

use crate::keys::{hash16, journal_checkpoint, ThreadKeys};
use crate::pieces::{self, Fetched, NewPieces};
use crate::transaction::{fenced, stmt, Param};
use crate::PostgresCheckpointer;
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::backend::{corrupt, encode};
use stategraph_checkpoint::chunks;
use stategraph_checkpoint::codec;
use stategraph_checkpoint::{CheckpointError, CheckpointId, CheckpointRecord, PendingWrite};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Row};

// Each write is one `fenced!` statement: $4 is the thread's key; its own parameters from $6.
const PUT_CHECKPOINT: &str = fenced!(
    "INSERT INTO stategraph_checkpoints (thread_key, id, names_pieces, record)
    SELECT $4, $6, $7, $8 FROM fence
    ON CONFLICT (thread_key, id)
    DO UPDATE SET names_pieces = EXCLUDED.names_pieces, record = EXCLUDED.record"
);
const GET_CHECKPOINT: &str =
    "SELECT id, record FROM stategraph_checkpoints WHERE thread_key = $1 AND id = $2";
const NEWEST_CHECKPOINT: &str = "SELECT id, record FROM stategraph_checkpoints
    WHERE thread_key = $1 ORDER BY id DESC LIMIT 1";
const LIST_CHECKPOINTS: &str = "SELECT id, record FROM stategraph_checkpoints
    WHERE thread_key = $1 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3";
// Sequence numbers follow the order of the array: the writes read back in the order saved.
const PUT_WRITES: &str = fenced!(
    "INSERT INTO stategraph_writes (thread_key, checkpoint, names_pieces, record)
    SELECT $4, $6, w.names_pieces, w.record
    FROM fence, unnest($7::boolean[], $8::bytea[]) WITH ORDINALITY AS w(names_pieces, record, n)
    ORDER BY w.n"
);
const GET_WRITES: &str = "SELECT record FROM stategraph_writes
    WHERE thread_key = $1 AND checkpoint = $2 ORDER BY seq";
const PUT_JOURNAL: &str = fenced!(
    "INSERT INTO stategraph_journal (thread_key, key_hash, key, checkpoint, value)
    SELECT $4, $6, $7, $8, $9 FROM fence
    ON CONFLICT (thread_key, key_hash)
    DO UPDATE SET key = EXCLUDED.key, checkpoint = EXCLUDED.checkpoint, value = EXCLUDED.value"
);
const GET_JOURNAL: &str =
    "SELECT key, value FROM stategraph_journal WHERE thread_key = $1 AND key_hash = $2";
// `key` is BYTEA: ordered by its bytes, as the other backends list.
const LIST_JOURNAL: &str = "SELECT key FROM stategraph_journal WHERE thread_key = $1 ORDER BY key";

impl PostgresCheckpointer {
    pub(crate) async fn write_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        let thread = record.thread_id.as_str();
        let keys = ThreadKeys::of(thread);
        let mut pieces = NewPieces::default();
        let bytes = chunks::encode_checkpoint(record, &mut pieces)?;
        let names_pieces = chunks::may_hold_pieces(&bytes);
        let write = stmt!(PUT_CHECKPOINT, record.id, names_pieces, bytes);
        self.write_fenced(thread, &keys, flush, pieces, write).await
    }

    /// The checkpoint `id`, or the newest.
    pub(crate) async fn read_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let found = match id {
            Some(id) => {
                self.read_checkpoints(thread, GET_CHECKPOINT, vec![Box::new(key), Box::new(id)])
            }
            None => self.read_checkpoints(thread, NEWEST_CHECKPOINT, vec![Box::new(key)]),
        };
        Ok(found.await?.into_iter().next())
    }

    pub(crate) async fn list(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let params: Vec<Param> = vec![Box::new(key), Box::new(before), Box::new(limit)];
        self.read_checkpoints(thread, LIST_CHECKPOINTS, params)
            .await
    }

    async fn read_checkpoints(
        &self,
        thread: &str,
        sql: &'static str,
        params: Vec<Param>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let decode = |rows: Vec<Row>, pieces: &Fetched| -> Result<_, CheckpointError> {
            rows.iter()
                .map(|row| {
                    let id: CheckpointId =
                        row.try_get(0).map_err(|e| self.target.query_error(&e))?;
                    let bytes: &[u8] = row.try_get(1).map_err(|e| self.target.query_error(&e))?;
                    chunks::decode_checkpoint(thread, id, bytes, pieces)
                })
                .collect()
        };
        let (rows, pieces) = self.read_with_pieces(&key, sql, &params, 1).await?;
        decode(rows, &pieces)
    }

    pub(crate) async fn write_pending(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        if writes.is_empty() {
            return if flush {
                self.flush_all().await
            } else {
                Ok(())
            };
        }
        let keys = ThreadKeys::of(thread);
        let mut pieces = NewPieces::default();
        let (mut names, mut records) = (Vec::new(), Vec::new());
        for w in writes {
            // A large result is kept as pieces it shares with the thread's snapshots.
            let bytes = chunks::spill(encode(thread, w)?, None, &mut pieces)
                .map_err(|e| e.in_record(thread, Some(checkpoint), "pending writes"))?;
            names.push(chunks::may_hold_pieces(&bytes));
            records.push(bytes);
        }
        let write = stmt!(PUT_WRITES, checkpoint, names, records);
        self.write_fenced(thread, &keys, flush, pieces, write).await
    }

    pub(crate) async fn read_pending(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let params: Vec<Param> = vec![Box::new(key.clone()), Box::new(checkpoint)];
        let (rows, pieces) = self.read_with_pieces(&key, GET_WRITES, &params, 0).await?;
        rows.iter()
            .map(|row| {
                let bytes: &[u8] = row.try_get(0).map_err(|e| self.target.query_error(&e))?;
                chunks::unspill(bytes, &pieces)
                    .and_then(|frame| codec::decode(&frame))
                    .map_err(|e| corrupt(thread, Some(checkpoint), "pending writes", e))
            })
            .collect()
    }

    /// Runs a read; when a record it found (column `record_at`) names pieces, runs it again in
    /// one snapshot with the pieces.
    async fn read_with_pieces(
        &self,
        thread_key: &[u8],
        sql: &'static str,
        params: &[Param],
        record_at: usize,
    ) -> Result<(Vec<Row>, Fetched), CheckpointError> {
        let params: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
        let mut client = self.client().await?;
        let rows = async {
            let statement = client.prepare_cached(sql).await?;
            client.query(&statement, &params).await
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        if !names_pieces(&rows, record_at) {
            return Ok((rows, Fetched::default()));
        }
        async {
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let statement = tx.prepare_cached(sql).await?;
            let rows = tx.query(&statement, &params).await?;
            let records: Vec<&[u8]> = rows
                .iter()
                .filter_map(|r| r.try_get::<_, &[u8]>(record_at).ok())
                .collect();
            let fetched = pieces::fetch(&tx, thread_key, &records, true).await?;
            tx.commit().await?;
            Ok((rows, fetched))
        }
        .await
        .map_err(|e: tokio_postgres::Error| self.target.query_error(&e))
    }

    pub(crate) async fn read_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let thread_key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let row = async {
            let statement = client.prepare_cached(GET_JOURNAL).await?;
            client
                .query_opt(&statement, &[&thread_key, &hash16(key)])
                .await
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let stored_key: &[u8] = row.try_get(0).map_err(|e| self.target.query_error(&e))?;
        if stored_key != key.as_bytes() {
            // Another key with the same hash: this one was never recorded.
            return Ok(None);
        }
        let value: &[u8] = row.try_get(1).map_err(|e| self.target.query_error(&e))?;
        codec::decode(value)
            .map(Some)
            .map_err(|e| corrupt(thread, None, "journal entry", e))
    }

    pub(crate) async fn journal_keys(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        let thread_key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let rows = async {
            let statement = client.prepare_cached(LIST_JOURNAL).await?;
            client.query(&statement, &[&thread_key]).await
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        rows.iter()
            .map(|row| {
                let key: Vec<u8> = row.try_get(0).map_err(|e| self.target.query_error(&e))?;
                String::from_utf8(key).map_err(|e| {
                    corrupt(
                        thread,
                        None,
                        "journal entry",
                        codec::FrameError::Decode(format!("its key is not UTF-8: {e}")),
                    )
                })
            })
            .collect()
    }

    pub(crate) async fn write_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        let keys = ThreadKeys::of(thread);
        let bytes = encode(thread, value)?;
        let write = stmt!(
            PUT_JOURNAL,
            hash16(key),
            key.as_bytes().to_vec(),
            journal_checkpoint(key),
            bytes
        );
        // Always durable: the caller paid for the call it records.
        self.write_fenced(thread, &keys, true, NewPieces::default(), write)
            .await
    }
}

/// Whether a row's record names pieces (or is too damaged to tell, which its reader reports).
fn names_pieces(rows: &[Row], record_at: usize) -> bool {
    rows.iter().any(|r| {
        r.try_get::<_, &[u8]>(record_at)
            .is_ok_and(chunks::may_hold_pieces)
    })
}
