//! A worker's side of the queue: claiming a run under a fenced lease, renewing it, saying where
//! the thread was when the run started, recording the outcome, or giving the run back.
//!
//! Every change after the claim names the claim's epoch and applies only while the run is still
//! running at that epoch, so a worker that stalled past its lease, whose run another worker
//! claimed meanwhile, changes nothing ([`QueueError::Lost`]).

use super::{Outcome, QueueError, RunId, RunQueue, Start, Status, Stop};
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::CheckpointId;
use std::time::Duration;

/// The oldest run a worker may take: queued, or running under a lease that lapsed (its worker
/// died), and the first of its thread still to run. Runs locked by another claim in progress are
/// skipped, so workers never wait on one another. The epoch is a new fencing token from the
/// sequence the threads' leases use. `lapsed_worker`: the worker whose lease lapsed, for a
/// takeover.
///
/// Whatever the planner believes of the queue's depth (its statistics lag behind a burst of
/// submits), the claim must walk the active runs in `seq` order and stop at the first it may
/// take, each tested with one probe of `stategraph_runs_active_by_thread`: the earlier-run test
/// is a scalar subquery (a `NOT EXISTS` becomes an anti-join the planner may run against every
/// active run, for every candidate), and the claim runs with sorting off (see [`NO_SORT`]).
const CLAIM: &str = "WITH next AS (
        SELECT r.id, CASE WHEN r.status = 'running' THEN r.worker END AS lapsed_worker
        FROM stategraph_runs r
        WHERE r.status IN ('queued', 'running')
          AND (r.status = 'queued' OR r.lease_expires_at < now())
          AND r.seq = (
              SELECT min(e.seq) FROM stategraph_runs e
              WHERE e.thread_key = r.thread_key AND e.status IN ('queued', 'running'))
        ORDER BY r.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED)
    UPDATE stategraph_runs r SET
        status = 'running',
        worker = $1,
        epoch = nextval('stategraph_lease_epochs'),
        lease_expires_at = now() + $2::bigint * interval '1 millisecond',
        claims = r.claims + 1,
        since = now()
    FROM next WHERE r.id = next.id
    RETURNING r.id, r.thread, r.graph, r.overrides, r.kind, r.payload, r.metadata, r.epoch,
              r.claims, r.stop, r.started, r.base_checkpoint, next.lapsed_worker";
/// For the claim's transaction: the oldest runs come from the index on `seq`, never from a sort
/// of every candidate (which the planner picks when it wrongly believes there are few).
const NO_SORT: &str = "SET LOCAL enable_sort = off";
const HEARTBEAT: &str = "UPDATE stategraph_runs
    SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE id = $1 AND epoch = $2 AND status = 'running' RETURNING stop";
const STARTED: &str = "UPDATE stategraph_runs SET
        base_checkpoint = CASE WHEN started THEN base_checkpoint ELSE $3 END,
        started = true
    WHERE id = $1 AND epoch = $2 AND status = 'running'
    RETURNING base_checkpoint";
/// An outcome other than `cancelled` is refused while a rollback is asked: the run's checkpoints
/// must be dropped first (a submit asked it under the same row lock, so one of them waits).
/// A cancel or an interrupt stored before the outcome holds: the run ends `cancelled` whatever
/// its last step ended it as ($5, $6: the messages then, saying what the run had reached),
/// since the one who stopped it was told it stops. The row lock orders the two: a stop stored
/// after this is refused by the cancel's `status = 'running'` test.
const FINISH: &str = "UPDATE stategraph_runs SET
        status = CASE WHEN stop IN ('cancel', 'interrupt') THEN 'cancelled' ELSE $3 END,
        message = CASE WHEN $3 = 'cancelled' THEN $4
                       WHEN stop = 'cancel' THEN $5
                       WHEN stop = 'interrupt' THEN $6
                       ELSE $4 END,
        lease_expires_at = NULL, since = now()
    WHERE id = $1 AND epoch = $2 AND status = 'running'
      AND (stop IS DISTINCT FROM 'rollback' OR $3 = 'cancelled')
    RETURNING status";
const STOP_OF: &str =
    "SELECT stop FROM stategraph_runs WHERE id = $1 AND epoch = $2 AND status = 'running'";
/// A run given back with a cancel or an interrupt stored ends `cancelled` here ($3, $4: the
/// messages): its step in flight is saved, and nothing is left to do for it. A rollback stays
/// queued: the next worker drops its checkpoints.
const RELEASE: &str = "UPDATE stategraph_runs SET
        status = CASE WHEN stop IN ('cancel', 'interrupt') THEN 'cancelled' ELSE 'queued' END,
        message = CASE WHEN stop = 'cancel' THEN $3
                       WHEN stop = 'interrupt' THEN $4 ELSE message END,
        worker = CASE WHEN stop IN ('cancel', 'interrupt') THEN worker END,
        lease_expires_at = NULL, since = now()
    WHERE id = $1 AND epoch = $2 AND status = 'running' RETURNING status";

/// A run a worker claimed.
#[derive(Clone, Debug)]
pub struct Claimed {
    /// The run.
    pub id: RunId,
    /// Its thread.
    pub thread: String,
    /// Its graph, as submitted.
    pub graph: String,
    /// `KEY=VALUE` overrides of the graph file.
    pub overrides: Vec<String>,
    /// What it starts from.
    pub start: Start,
    /// The submitter's metadata.
    pub metadata: serde_json::Value,
    /// The claim's fencing token: every later change names it.
    pub epoch: i64,
    /// How many times the run was claimed, this claim included (more than one: it was taken
    /// over from a worker that died or was drained).
    pub claims: u32,
    /// A stop asked before this claim: the run must not run on (a cancelled run is never
    /// resumed), and a rollback's checkpoints are to be dropped.
    pub stop: Option<Stop>,
    /// Whether a worker started the run before (see [`base_checkpoint`](Self::base_checkpoint)).
    pub started: bool,
    /// The thread's newest checkpoint when the run first started (`None`: it had none).
    pub base_checkpoint: Option<CheckpointId>,
    /// The worker this claim took the run from, its lease lapsed (it died, froze or lost the
    /// database); `None` for a run that was queued (new, or given back by a draining worker).
    pub taken_over_from: Option<String>,
}

impl RunQueue {
    /// Claims the oldest run this worker may run, under a lease of `lease` (renew it with
    /// [`heartbeat`](Self::heartbeat)); `None` when there is none. A run whose worker's lease
    /// lapsed is claimed again, from where its thread is.
    ///
    /// ```no_run
    /// # async fn demo(queue: stategraph_postgres::queue::RunQueue) -> Result<(), stategraph_postgres::queue::QueueError> {
    /// use std::time::Duration;
    /// if let Some(run) = queue.claim("worker-1", Duration::from_secs(30)).await? {
    ///     // ... run it, heartbeating ...
    ///     queue.finish(run.id, run.epoch, stategraph_postgres::queue::Outcome::Done).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn claim(
        &self,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Claimed>, QueueError> {
        let lease_ms = millis(lease);
        let mut client = self.client().await?;
        let row = async {
            let tx = client.transaction().await?;
            // The epoch must be on disk before its holder acts on it (as a thread's lease's).
            tx.batch_execute("SET LOCAL synchronous_commit = on")
                .await?;
            tx.batch_execute(NO_SORT).await?;
            let row = tx.query_opt(CLAIM, &[&worker, &lease_ms]).await?;
            tx.commit().await?;
            Ok(row)
        }
        .await
        .map_err(|e: tokio_postgres::Error| self.db(e))?;
        let Some(row) = row else { return Ok(None) };
        self.read_claim(&row).map(Some)
    }

    fn read_claim(&self, row: &tokio_postgres::Row) -> Result<Claimed, QueueError> {
        let read = || -> Result<Claimed, tokio_postgres::Error> {
            let kind: String = row.try_get(4)?;
            let payload: Option<String> = row.try_get(5)?;
            let metadata: String = row.try_get(6)?;
            let stop: Option<String> = row.try_get(9)?;
            let claims: i32 = row.try_get(8)?;
            Ok(Claimed {
                id: RunId(row.try_get(0)?),
                thread: row.try_get(1)?,
                graph: row.try_get(2)?,
                overrides: row.try_get(3)?,
                start: start_of(&kind, payload.as_deref()),
                metadata: serde_json::from_str(&metadata).unwrap_or_default(),
                epoch: row.try_get(7)?,
                claims: u32::try_from(claims).unwrap_or(0),
                stop: stop.as_deref().and_then(Stop::parse),
                started: row.try_get(10)?,
                base_checkpoint: row.try_get(11)?,
                taken_over_from: row.try_get(12)?,
            })
        };
        read().map_err(|e| self.db(e))
    }

    /// Renews the lease of a run this worker claimed at `epoch`, for `lease` from now; returns
    /// the stop asked of it, if any. [`QueueError::Lost`] when the run is no longer this
    /// worker's: it must stop at once, and record nothing.
    pub async fn heartbeat(
        &self,
        run: RunId,
        epoch: i64,
        lease: Duration,
    ) -> Result<Option<Stop>, QueueError> {
        let client = self.client().await?;
        let row = client
            .query_opt(HEARTBEAT, &[&run.0, &epoch, &millis(lease)])
            .await
            .map_err(|e| self.db(e))?
            .ok_or(QueueError::Lost { run, epoch })?;
        let stop: Option<String> = row.try_get(0).map_err(|e| self.db(e))?;
        Ok(stop.as_deref().and_then(Stop::parse))
    }

    /// The stop asked of a run this worker holds at `epoch`, read without renewing.
    pub async fn stop_asked(&self, run: RunId, epoch: i64) -> Result<Option<Stop>, QueueError> {
        let client = self.client().await?;
        let row = client
            .query_opt(STOP_OF, &[&run.0, &epoch])
            .await
            .map_err(|e| self.db(e))?
            .ok_or(QueueError::Lost { run, epoch })?;
        let stop: Option<String> = row.try_get(0).map_err(|e| self.db(e))?;
        Ok(stop.as_deref().and_then(Stop::parse))
    }

    /// Records that the run starts on its thread, whose newest checkpoint is `base`; a run
    /// started before keeps the base of its first start, which this returns.
    pub async fn mark_started(
        &self,
        run: RunId,
        epoch: i64,
        base: Option<CheckpointId>,
    ) -> Result<Option<CheckpointId>, QueueError> {
        let client = self.client().await?;
        let row = client
            .query_opt(STARTED, &[&run.0, &epoch, &base])
            .await
            .map_err(|e| self.db(e))?
            .ok_or(QueueError::Lost { run, epoch })?;
        row.try_get(0).map_err(|e| self.db(e))
    }

    /// Records how the run ended; its lease ends with it, and returns the status recorded.
    /// [`QueueError::Lost`] when the run is no longer this worker's. A cancel or an interrupt
    /// asked before this holds: the run is recorded [`Status::Cancelled`] whatever `outcome`
    /// says (its message tells what the run had reached). While a rollback is asked of the run
    /// only [`Outcome::Cancelled`] is recorded (after its checkpoints were dropped): another
    /// outcome fails with [`QueueError::RollbackAsked`].
    ///
    /// ```no_run
    /// # async fn demo(queue: stategraph_postgres::queue::RunQueue, run: stategraph_postgres::queue::Claimed) -> Result<(), stategraph_postgres::queue::QueueError> {
    /// use stategraph_postgres::queue::{Outcome, Status};
    /// match queue.finish(run.id, run.epoch, Outcome::Done).await? {
    ///     Status::Cancelled => println!("cancelled as it ended"),
    ///     status => println!("{status}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn finish(
        &self,
        run: RunId,
        epoch: i64,
        outcome: Outcome,
    ) -> Result<Status, QueueError> {
        let reached = match &outcome {
            Outcome::Done => "reached its end".to_string(),
            Outcome::Paused => "paused for an answer".to_string(),
            Outcome::Failed(why) => format!("failed: {why}"),
            Outcome::Cancelled(_) => String::new(),
        };
        let late = |stop: Stop| format!("{}; the run had already {reached}", stop.message());
        let (on_cancel, on_interrupt) = (late(Stop::Cancel), late(Stop::Interrupt));
        let (status, message) = match outcome {
            Outcome::Done => ("done", None),
            Outcome::Paused => ("paused", None),
            Outcome::Failed(why) => ("failed", Some(why)),
            Outcome::Cancelled(why) => ("cancelled", Some(why)),
        };
        let client = self.client().await?;
        let row = client
            .query_opt(
                FINISH,
                &[&run.0, &epoch, &status, &message, &on_cancel, &on_interrupt],
            )
            .await
            .map_err(|e| self.db(e))?;
        if let Some(row) = row {
            return self.status_of(&row);
        }
        match self.stop_asked(run, epoch).await? {
            Some(Stop::Rollback) => Err(QueueError::RollbackAsked(run)),
            _ => Err(QueueError::Lost { run, epoch }),
        }
    }

    /// Gives a run back to the queue (a draining worker's, or one the database failed under),
    /// to be claimed next by any worker, which continues it from its thread's last checkpoint;
    /// returns [`Status::Queued`]. A run asked to cancel or interrupt meanwhile ends there
    /// instead ([`Status::Cancelled`]: its step in flight was saved, and nothing else is to run).
    pub async fn release(&self, run: RunId, epoch: i64) -> Result<Status, QueueError> {
        let client = self.client().await?;
        let messages = (Stop::Cancel.message(), Stop::Interrupt.message());
        let row = client
            .query_opt(RELEASE, &[&run.0, &epoch, &messages.0, &messages.1])
            .await
            .map_err(|e| self.db(e))?
            .ok_or(QueueError::Lost { run, epoch })?;
        self.status_of(&row)
    }

    fn status_of(&self, row: &tokio_postgres::Row) -> Result<Status, QueueError> {
        let status: String = row.try_get(0).map_err(|e| self.db(e))?;
        Status::parse(&status).ok_or_else(|| {
            QueueError::Invalid(format!(
                "the queue holds an unknown status `{status}`: a newer program wrote it"
            ))
        })
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(super) fn start_of(kind: &str, payload: Option<&str>) -> Start {
    let value = payload.and_then(|p| serde_json::from_str(p).ok());
    match kind {
        "resume" => Start::Resume(value),
        _ => Start::Input(value.unwrap_or_else(|| serde_json::json!({}))),
    }
}
