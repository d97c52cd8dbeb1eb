//! How a write reaches the database. Every write of a thread is one transaction that passes the
//! fence (`leases.rs`) before it commits, committed durably or lazily as the caller asked.
//!
//! A write of one record, nearly every write, is *one statement* ([`fenced!`]): the fence, the
//! thread's row and the record, committed on its own (no BEGIN, no COMMIT): one message out, one
//! answer back, and the least work for the server, which pays most of a step's CPU. The fence
//! *raises* when it refuses, and an error anywhere in a statement undoes all of it.
//!
//! Other writes (deletes, prunes) are sent as one pipeline: BEGIN, the fence, the statements and
//! COMMIT leave together and cost one round trip. That is safe because the fence raises: the
//! error aborts the transaction, the statements after it fail unexecuted, and the COMMIT only
//! ends it. A write of new pieces first
//! asks, after its fence and inside its transaction, which of them the thread holds already, so a
//! sweep (which holds the root's row exclusively) cannot take one away before the record naming
//! it commits.

use crate::keys::ThreadKeys;
use crate::pieces::NewPieces;
use crate::write_failure::is_refusal;
pub(crate) use crate::write_failure::Failed;
use crate::PostgresCheckpointer;
use deadpool_postgres::{GenericClient, Object};
use futures::future::BoxFuture;
use stategraph_checkpoint::CheckpointError;
use std::collections::HashSet;
use std::task::Poll;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// One parameter of a statement.
pub(crate) type Param = Box<dyn ToSql + Sync + Send>;

/// A statement and its parameters.
pub(crate) struct Stmt {
    pub(crate) sql: &'static str,
    pub(crate) params: Vec<Param>,
}

/// `stmt!(SQL, a, b)`: a statement with owned parameters.
macro_rules! stmt {
    ($sql:expr $(, $param:expr)* $(,)?) => {
        $crate::transaction::Stmt {
            sql: $sql,
            params: vec![$(Box::new($param) as $crate::transaction::Param),*],
        }
    };
}
pub(crate) use stmt;

/// `fenced!(TAIL)`: a whole write of a thread as one statement. `TAIL` is an INSERT whose rows
/// come `FROM fence` (one row), with its own parameters from `$6`; the first five are
/// [`PostgresCheckpointer::write_fenced`]'s: the root thread's key, the epoch this handle holds
/// there (NULL: unfenced), whether the commit waits for the disk, the thread's key and its id.
///
/// - `fence` locks the root's row `FOR SHARE`, as `stategraph_fence` does: a lease swap in
///   flight (`FOR UPDATE`) is waited for and its epoch read (a locked row is read as committed
///   last), and a swap waits for this write to commit. When the epochs differ it calls
///   `stategraph_refuse` (schema v6), whose error aborts the statement, so nothing of the write
///   is kept. A lazy write turns `synchronous_commit` off for its own transaction only.
///   A materialized CTE computes its whole row, so both run before any row is inserted.
/// - `ensure` records the thread's row unless it is the root's row, just found locked (so no
///   delete can remove it before this commits).
macro_rules! fenced {
    ($tail:literal) => {
        concat!(
            "WITH fence AS MATERIALIZED (
    SELECT CASE WHEN $2::bigint IS NULL OR r.epoch IS NOT DISTINCT FROM $2
                THEN r.epoch IS NOT NULL
                ELSE stategraph_refuse($2, r.epoch) END AS root_found,
           CASE WHEN $3::boolean THEN NULL
                ELSE set_config('synchronous_commit', 'off', true) END AS lazy
    FROM (SELECT 1) AS one
    LEFT JOIN (SELECT t.epoch FROM stategraph_threads t WHERE t.thread_key = $1::bytea
               FOR SHARE) AS r ON true
), ensure AS (
    INSERT INTO stategraph_threads (thread_key, thread, root_key)
    SELECT $4::bytea, $5::text, $1 FROM fence WHERE NOT (fence.root_found AND $4 = $1)
    ON CONFLICT (thread_key) DO NOTHING
)
",
            $tail
        )
    };
}
pub(crate) use fenced;

/// How a write holds its root thread's row.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// Writes of records: many at once.
    Shared,
    /// Deletes and sweeps: alone.
    Exclusive,
}

const INSERT_PIECES: &str = "INSERT INTO stategraph_pieces (thread_key, hash, bytes)
    SELECT $1, p.hash, p.bytes FROM unnest($2::bytea[], $3::bytea[]) AS p(hash, bytes)
    ON CONFLICT (thread_key, hash) DO NOTHING";
const STORED_PIECES: &str =
    "SELECT hash FROM stategraph_pieces WHERE thread_key = $1 AND hash = ANY($2)";
const FLUSH: &str = "INSERT INTO stategraph_flushes (slot, flushes) VALUES ($1, 1)
    ON CONFLICT (slot) DO UPDATE SET flushes = stategraph_flushes.flushes + 1";
/// Rows `flush` spreads its updates over, so flushing processes seldom wait for one another.
const FLUSH_SLOTS: u32 = 64;
/// New pieces go in statements of about this many bytes.
const PIECES_PER_STATEMENT: usize = 4 * 1024 * 1024;

impl PostgresCheckpointer {
    /// Runs `stmts` as one write transaction of `thread`, after its fence. `pieces` are the new
    /// pieces the statements' records name; they go in first. Returns each statement's rows.
    pub(crate) async fn write(
        &self,
        thread: &str,
        keys: &ThreadKeys,
        durable: bool,
        lock: Lock,
        pieces: NewPieces,
        stmts: Vec<Stmt>,
    ) -> Result<Vec<Vec<Row>>, CheckpointError> {
        let fence = self.fence(thread, keys, lock);
        let outcome = if pieces.is_empty() {
            let client = self.client().await?;
            one_trip(&client, durable, fence, stmts).await
        } else {
            self.write_with_pieces(keys, durable, fence, pieces, stmts)
                .await
        };
        match outcome {
            Ok(rows) => Ok(rows),
            Err(failed) => Err(self.failed(thread, failed).await),
        }
    }

    /// Writes one record of `thread`: `write` is a [`fenced!`] statement with its own
    /// parameters (from `$6`). Without new pieces it is one statement, committed on its own;
    /// with them it ends the transaction that stores them (its fence then finds the row it
    /// already holds).
    pub(crate) async fn write_fenced(
        &self,
        thread: &str,
        keys: &ThreadKeys,
        durable: bool,
        pieces: NewPieces,
        write: Stmt,
    ) -> Result<(), CheckpointError> {
        let held = self.held_epoch(thread);
        let mut params: Vec<Param> = vec![
            Box::new(keys.root.clone()),
            Box::new(held),
            Box::new(durable),
            Box::new(keys.key.clone()),
            Box::new(thread.to_string()),
        ];
        params.extend(write.params);
        let write = Stmt {
            sql: write.sql,
            params,
        };
        let outcome = if pieces.is_empty() {
            self.one_statement(write).await
        } else {
            let fence = self.fence(thread, keys, Lock::Shared);
            self.write_with_pieces(keys, durable, fence, pieces, vec![write])
                .await
                .map(drop)
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(failed) => Err(self.failed(thread, failed).await),
        }
    }

    /// `write` as a transaction of its own: `execute` returns at the server's ReadyForQuery,
    /// which follows the commit (and, when durable, the flush), or with the error that undid it.
    async fn one_statement(&self, write: Stmt) -> Result<(), Failed> {
        let client = self.client().await?;
        let statement = client.prepare_cached(write.sql).await?;
        client.execute(&statement, &refs(&write.params)).await?;
        Ok(())
    }

    /// What a failed write means: a refused fence is a thread another run holds now.
    pub(crate) async fn failed(&self, thread: &str, failed: Failed) -> CheckpointError {
        match failed {
            Failed::Store(e) => e,
            Failed::Db(e) if is_refusal(&e) => self.refused(thread).await,
            Failed::Db(e) => self.target.query_error(&e),
        }
    }

    async fn write_with_pieces(
        &self,
        keys: &ThreadKeys,
        durable: bool,
        fence: Stmt,
        pieces: NewPieces,
        stmts: Vec<Stmt>,
    ) -> Result<Vec<Vec<Row>>, Failed> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if !durable {
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .await?;
        }
        let hashes: Vec<Vec<u8>> = pieces.hashes().map(|h| h.to_vec()).collect();
        let asked = [fence, stmt!(STORED_PIECES, keys.key.clone(), hashes)];
        let mut answers = pipelined(&tx, &asked).await?;
        let stored: HashSet<Vec<u8>> = match answers.pop() {
            Some(rows) => rows
                .iter()
                .map(|r| r.try_get::<_, Vec<u8>>(0))
                .collect::<Result<_, _>>()?,
            None => HashSet::new(),
        };
        let mut missing: Vec<_> = pieces
            .into_list()
            .into_iter()
            .filter(|(hash, _)| !stored.contains(&hash[..]))
            .collect();
        // In one order for every writer: two writes of the thread inserting shared pieces then
        // wait for one another on the first they share, never each on the other's.
        missing.sort_unstable_by_key(|(hash, _)| *hash);
        let mut all = Vec::new();
        let (mut batch_hashes, mut batch_bytes, mut size) = (Vec::new(), Vec::new(), 0);
        for (hash, bytes) in missing {
            size += bytes.len();
            batch_hashes.push(hash.to_vec());
            batch_bytes.push(bytes);
            if size >= PIECES_PER_STATEMENT {
                let (h, b) = (
                    std::mem::take(&mut batch_hashes),
                    std::mem::take(&mut batch_bytes),
                );
                all.push(stmt!(INSERT_PIECES, keys.key.clone(), h, b));
                size = 0;
            }
        }
        if !batch_hashes.is_empty() {
            all.push(stmt!(
                INSERT_PIECES,
                keys.key.clone(),
                batch_hashes,
                batch_bytes
            ));
        }
        let inserts = all.len();
        all.extend(stmts);
        let rows = pipelined(&tx, &all).await?;
        tx.commit().await?;
        Ok(rows.into_iter().skip(inserts).collect())
    }

    /// Makes every commit before it durable: a durable commit that wrote something waits for
    /// the log up to its own record, which holds every earlier one.
    pub(crate) async fn flush_all(&self) -> Result<(), CheckpointError> {
        let n = self
            .flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let slot = (n % FLUSH_SLOTS) as i32;
        let client = self.client().await?;
        let outcome = one_trip(&client, true, stmt!(FLUSH, slot), Vec::new()).await;
        outcome.map(drop).map_err(|failed| match failed {
            Failed::Db(e) => self.target.query_error(&e),
            Failed::Store(e) => e,
        })
    }
}

/// BEGIN, `first`, `stmts` and COMMIT in one pipeline. Returns the rows of `stmts`.
async fn one_trip(
    client: &Object,
    durable: bool,
    first: Stmt,
    stmts: Vec<Stmt>,
) -> Result<Vec<Vec<Row>>, Failed> {
    let all: Vec<Stmt> = std::iter::once(first).chain(stmts).collect();
    let mut prepared = Vec::with_capacity(all.len());
    for s in &all {
        prepared.push(client.prepare_cached(s.sql).await?);
    }
    let begin = if durable {
        "BEGIN"
    } else {
        // The caller flushes later (or never needs to): the commit need not wait for the disk.
        "BEGIN; SET LOCAL synchronous_commit = off"
    };
    let mut requests: Vec<BoxFuture<'_, Result<Vec<Row>, tokio_postgres::Error>>> =
        Vec::with_capacity(all.len() + 2);
    requests.push(Box::pin(async move {
        client.batch_execute(begin).await.map(|()| Vec::new())
    }));
    for (statement, s) in prepared.iter().zip(&all) {
        let params = refs(&s.params);
        requests.push(Box::pin(
            async move { client.query(statement, &params).await },
        ));
    }
    requests.push(Box::pin(async move {
        client.batch_execute("COMMIT").await.map(|()| Vec::new())
    }));
    let mut answers = send_in_order(requests).await.into_iter();
    let _begin = answers.next().transpose()?;
    let mut rows = Vec::with_capacity(all.len());
    // The first failure is the statement that failed; those after it only say the transaction
    // was aborted, and the COMMIT of an aborted transaction rolls it back.
    for answer in answers.by_ref().take(all.len()) {
        rows.push(answer?);
    }
    answers.next().transpose()?;
    Ok(rows.into_iter().skip(1).collect())
}

/// `stmts` sent together on an open transaction; every answer, or the first failure.
pub(crate) async fn pipelined(
    tx: &deadpool_postgres::Transaction<'_>,
    stmts: &[Stmt],
) -> Result<Vec<Vec<Row>>, tokio_postgres::Error> {
    let mut prepared = Vec::with_capacity(stmts.len());
    for s in stmts {
        prepared.push(tx.prepare_cached(s.sql).await?);
    }
    let mut requests: Vec<BoxFuture<'_, Result<Vec<Row>, tokio_postgres::Error>>> =
        Vec::with_capacity(stmts.len());
    for (statement, s) in prepared.iter().zip(stmts) {
        let params = refs(&s.params);
        requests.push(Box::pin(async move { tx.query(statement, &params).await }));
    }
    send_in_order(requests).await.into_iter().collect()
}

fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect()
}

/// Polls each request once, in order, then awaits them in order. tokio-postgres sends a
/// request when its future is first polled, so every request leaves before any answer is
/// awaited, and in this order (a `join` may poll its futures in another).
async fn send_in_order<'a, T>(mut requests: Vec<BoxFuture<'a, T>>) -> Vec<T> {
    let mut early: Vec<Option<T>> = Vec::with_capacity(requests.len());
    for request in requests.iter_mut() {
        early.push(match futures::poll!(request.as_mut()) {
            Poll::Ready(answer) => Some(answer),
            Poll::Pending => None,
        });
    }
    let mut answers = Vec::with_capacity(requests.len());
    for (request, early) in requests.into_iter().zip(early) {
        answers.push(match early {
            Some(answer) => answer,
            None => request.await,
        });
    }
    answers
}
