//! A worker's side of the queue: claiming a run under a fenced lease, renewing it, saying where
//! the thread was when the run started, recording the outcome, or giving the run back.
//!
//! Every change after the claim names the claim's epoch and applies only while the run is still
//! running at that epoch, so a worker that stalled past its lease, whose run another worker
//! claimed meanwhile, changes nothing ([`QueueError::Lost`]).

use super::{Outcome, QueueError, RunId, RunQueue, Start, Stop};
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::CheckpointId;
use std::time::Duration;

/// The oldest run a worker may take: queued, or running under a lease that lapsed (its worker
/// died), and the first of its thread still to run. Runs locked by another claim in progress are
/// skipped, so workers never wait on one another. The epoch is a new fencing token from the
/// sequence the threads' leases use.
const CLAIM: &str = "WITH next AS (
        SELECT r.id FROM stategraph_runs r
        WHERE r.status IN ('queued', 'running')
          AND (r.status = 'queued' OR r.lease_expires_at < now())
          AND NOT EXISTS (
              SELECT 1 FROM stategraph_runs e
              WHERE e.thread_key = r.thread_key AND e.seq < r.seq
                AND e.status IN ('queued', 'running'))
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
              r.claims, r.stop, r.started, r.base_checkpoint";
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
const FINISH: &str = "UPDATE stategraph_runs
    SET status = $3, message = $4, lease_expires_at = NULL, since = now()
    WHERE id = $1 AND epoch = $2 AND status = 'running'
      AND (stop IS DISTINCT FROM 'rollback' OR $3 = 'cancelled')
    RETURNING id";
const STOP_OF: &str =
    "SELECT stop FROM stategraph_runs WHERE id = $1 AND epoch = $2 AND status = 'running'";
const RELEASE: &str = "UPDATE stategraph_runs
    SET status = 'queued', worker = NULL, lease_expires_at = NULL, since = now()
    WHERE id = $1 AND epoch = $2 AND status = 'running' RETURNING id";

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

    /// Records how the run ended; its lease ends with it. [`QueueError::Lost`] when the run is
    /// no longer this worker's. While a rollback is asked of the run only
    /// [`Outcome::Cancelled`] is recorded (after its checkpoints were dropped): another outcome
    /// fails with [`QueueError::RollbackAsked`].
    pub async fn finish(&self, run: RunId, epoch: i64, outcome: Outcome) -> Result<(), QueueError> {
        let (status, message) = match outcome {
            Outcome::Done => ("done", None),
            Outcome::Paused => ("paused", None),
            Outcome::Failed(why) => ("failed", Some(why)),
            Outcome::Cancelled(why) => ("cancelled", Some(why)),
        };
        let client = self.client().await?;
        let row = client
            .query_opt(FINISH, &[&run.0, &epoch, &status, &message])
            .await
            .map_err(|e| self.db(e))?;
        if row.is_some() {
            return Ok(());
        }
        match self.stop_asked(run, epoch).await? {
            Some(Stop::Rollback) => Err(QueueError::RollbackAsked(run)),
            _ => Err(QueueError::Lost { run, epoch }),
        }
    }

    /// Gives a run back to the queue (a draining worker's), to be claimed next by any worker,
    /// which continues it from its thread's last checkpoint.
    pub async fn release(&self, run: RunId, epoch: i64) -> Result<(), QueueError> {
        let client = self.client().await?;
        client
            .query_opt(RELEASE, &[&run.0, &epoch])
            .await
            .map_err(|e| self.db(e))?
            .map(drop)
            .ok_or(QueueError::Lost { run, epoch })
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
