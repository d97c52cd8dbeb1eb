//! Submitting a run, with its strategy for a busy thread, and cancelling one.
//!
//! A submit holds its thread's advisory lock for its transaction, so two submits for one thread
//! see each other's runs (the strategy decides on what is really there) and take their
//! submission order (`seq`) in the order they commit.

use super::{QueueError, RunId, RunQueue, Start, Status, Strategy, Submission};
use crate::keys::hash16;
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::validate_thread_id;

const LOCK_THREAD: &str = "SELECT pg_advisory_xact_lock($1)";
const ACTIVE: &str = "SELECT id, status FROM stategraph_runs
    WHERE thread_key = $1 AND status IN ('queued', 'running') ORDER BY seq FOR UPDATE";
const INSERT: &str = "INSERT INTO stategraph_runs
    (id, thread, thread_key, graph, overrides, kind, payload, metadata, strategy)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
/// Queued runs an interrupt or a rollback supersedes end at once, except, under a rollback, one
/// that started before (given back by a draining worker, or by one the database failed under):
/// its checkpoints are to be dropped, which the next worker does ($3: the strategy).
const SUPERSEDE_QUEUED: &str = "UPDATE stategraph_runs
    SET status = 'cancelled', message = $2, since = now()
    WHERE id = ANY($1) AND status = 'queued' AND NOT (started AND $3 = 'rollback')";
/// A running run an interrupt or a rollback supersedes is asked to stop (and a started queued
/// one a rollback left, see above); a rollback outranks any other stop (its checkpoints must
/// go), a cancel outranks an interrupt.
const SUPERSEDE_RUNNING: &str = "UPDATE stategraph_runs
    SET stop = CASE WHEN stop = 'rollback' OR $2 = 'rollback' THEN 'rollback'
                    WHEN stop IS NULL THEN $2 ELSE stop END
    WHERE id = ANY($1) AND status IN ('queued', 'running')";
/// A queued (or paused) run is cancelled at once; a running one is asked to stop. A queued run
/// with a rollback asked stays queued: its checkpoints are dropped by the next worker, which
/// then records it cancelled.
const CANCEL: &str = "UPDATE stategraph_runs SET
    status = CASE WHEN status IN ('queued', 'paused') AND stop IS DISTINCT FROM 'rollback'
                  THEN 'cancelled' ELSE status END,
    stop = CASE WHEN status = 'running' AND (stop IS NULL OR stop = 'interrupt') THEN 'cancel'
                ELSE stop END,
    message = CASE WHEN status IN ('queued', 'paused') AND stop IS DISTINCT FROM 'rollback'
                   THEN 'cancelled' ELSE message END,
    since = CASE WHEN status IN ('queued', 'paused') AND stop IS DISTINCT FROM 'rollback'
                 THEN now() ELSE since END
    WHERE id = $1 RETURNING status";

/// A thread's runs that may still run, oldest first (the hash finds them, the text makes sure).
const ACTIVE_OF_THREAD: &str = "SELECT id FROM stategraph_runs
    WHERE thread_key = $1 AND thread = $2 AND status IN ('queued', 'running') ORDER BY seq";

/// The advisory lock key of a thread's submits: 8 bytes of its key.
fn lock_key(thread_key: &[u8]) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&thread_key[..8]);
    i64::from_be_bytes(bytes)
}

impl RunQueue {
    /// Enqueues a run; returns its id. On a thread with a run queued or running, follows the
    /// submission's [`Strategy`]: `Reject` fails with [`QueueError::Busy`], `Enqueue` queues it
    /// behind them, `Interrupt` and `Rollback` cancel the queued ones and ask the running one to
    /// stop at its next step (a rollback also has its checkpoints dropped) before this one runs.
    pub async fn submit(&self, submission: Submission) -> Result<RunId, QueueError> {
        let thread = submission
            .thread
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        validate_thread_id(&thread).map_err(|e| QueueError::Invalid(e.to_string()))?;
        let (kind, payload) = match &submission.start {
            Start::Input(input) => ("input", Some(input.to_string())),
            Start::Resume(answer) => ("resume", answer.as_ref().map(|a| a.to_string())),
        };
        let id = RunId::new();
        let key = hash16(&thread);
        let mut client = self.client().await?;
        let submitted = async {
            let tx = client.transaction().await?;
            tx.execute(LOCK_THREAD, &[&lock_key(&key)]).await?;
            let active: Vec<(uuid::Uuid, String)> = tx
                .query(ACTIVE, &[&key])
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_, tokio_postgres::Error>>()?;
            if let Some((run, status)) = active.first() {
                match submission.strategy {
                    Strategy::Reject => {
                        return Ok(Err(QueueError::Busy {
                            thread: thread.clone(),
                            run: RunId(*run),
                            status: Status::parse(status).unwrap_or(Status::Queued),
                        }))
                    }
                    Strategy::Enqueue => {}
                    Strategy::Interrupt | Strategy::Rollback => {
                        let ids: Vec<uuid::Uuid> = active.iter().map(|(id, _)| *id).collect();
                        let why =
                            format!("superseded by run {id} ({})", submission.strategy.as_str());
                        let stop = submission.strategy.as_str();
                        tx.execute(SUPERSEDE_QUEUED, &[&ids, &why, &stop]).await?;
                        tx.execute(SUPERSEDE_RUNNING, &[&ids, &stop]).await?;
                    }
                }
            }
            let metadata = submission.metadata.to_string();
            tx.execute(
                INSERT,
                &[
                    &id.0,
                    &thread,
                    &key,
                    &submission.graph,
                    &submission.overrides,
                    &kind,
                    &payload,
                    &metadata,
                    &submission.strategy.as_str(),
                ],
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(()))
        }
        .await
        .map_err(|e: tokio_postgres::Error| self.db(e))?;
        submitted.map(|()| id)
    }

    /// Cancels a run, as stored state: a queued run is cancelled at once and never runs (nor
    /// does a paused one resume); a running one is asked to stop, which its worker obeys at its
    /// next step boundary, or, if it died, the worker that claims the run next. Returns the
    /// run's status after: `Cancelled`, `Running` (stopping), `Queued` (a rollback asked of a
    /// run given back to the queue: the next worker drops its checkpoints and ends it
    /// cancelled), or the status it had already ended with.
    ///
    /// ```no_run
    /// # async fn demo(queue: stategraph_postgres::queue::RunQueue, run: stategraph_postgres::queue::RunId) {
    /// use stategraph_postgres::queue::Status;
    /// match queue.cancel(run).await.unwrap() {
    ///     Status::Cancelled => println!("cancelled before it ran"),
    ///     Status::Running => println!("stops at its next step"),
    ///     ended => println!("already {ended}"),
    /// }
    /// # }
    /// ```
    pub async fn cancel(&self, run: RunId) -> Result<Status, QueueError> {
        let client = self.client().await?;
        let row = client
            .query_opt(CANCEL, &[&run.0])
            .await
            .map_err(|e| self.db(e))?
            .ok_or(QueueError::NotFound(run))?;
        let status: String = row.try_get(0).map_err(|e| self.db(e))?;
        Ok(Status::parse(&status).unwrap_or(Status::Cancelled))
    }

    /// Cancels every run of `thread` that is queued or running (each as [`cancel`](Self::cancel)
    /// does); returns them with their status after, oldest first (none: the thread had no run
    /// to cancel). A run submitted after this is not cancelled.
    ///
    /// ```no_run
    /// # async fn demo(queue: stategraph_postgres::queue::RunQueue) -> Result<(), stategraph_postgres::queue::QueueError> {
    /// for (run, status) in queue.cancel_thread("acme-1").await? {
    ///     println!("{run}: {status}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel_thread(&self, thread: &str) -> Result<Vec<(RunId, Status)>, QueueError> {
        let key = hash16(thread);
        let client = self.client().await?;
        let rows = client
            .query(ACTIVE_OF_THREAD, &[&key, &thread])
            .await
            .map_err(|e| self.db(e))?;
        drop(client);
        let mut cancelled = Vec::with_capacity(rows.len());
        for row in rows {
            let run = RunId(row.try_get(0).map_err(|e| self.db(e))?);
            cancelled.push((run, self.cancel(run).await?));
        }
        Ok(cancelled)
    }
}
