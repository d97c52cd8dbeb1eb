//! What a person reads of the queue: the runs, their state, which worker runs them since when.

use super::claim::start_of;
use super::{QueueError, RunId, RunQueue, Start, Status, Stop, Strategy};
use crate::keys::hash16;
use deadpool_postgres::GenericClient;

const COLUMNS: &str = "id, thread, graph, status, stop, message, worker, strategy, kind, \
    payload, metadata, claims, \
    (extract(epoch FROM since) * 1000)::bigint, \
    (extract(epoch FROM created_at) * 1000)::bigint, \
    (extract(epoch FROM lease_expires_at) * 1000)::bigint, \
    (lease_expires_at < now())";

/// Which runs [`RunQueue::list`] returns.
///
/// ```
/// use stategraph_postgres::queue::{RunFilter, Status};
/// let running = RunFilter::default().status(Status::Running).limit(20);
/// # let _ = running;
/// ```
#[derive(Clone, Debug)]
pub struct RunFilter {
    /// Only this thread's.
    pub thread: Option<String>,
    /// Only runs in this state.
    pub status: Option<Status>,
    /// At most this many, newest first (100 by default).
    pub limit: usize,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            thread: None,
            status: None,
            limit: 100,
        }
    }
}

impl RunFilter {
    /// Only `thread`'s runs.
    pub fn thread(mut self, thread: impl Into<String>) -> Self {
        self.thread = Some(thread.into());
        self
    }

    /// Only runs in `status`.
    pub fn status(mut self, status: Status) -> Self {
        self.status = Some(status);
        self
    }

    /// At most `limit` runs.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
}

/// A run as the queue holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// The run.
    pub id: RunId,
    /// Its thread.
    pub thread: String,
    /// Its graph.
    pub graph: String,
    /// Its state.
    pub status: Status,
    /// A stop asked of it while it runs.
    pub stop: Option<Stop>,
    /// Why it failed, or by what it was cancelled.
    pub message: Option<String>,
    /// The worker that claimed it last (for a running run: runs it).
    pub worker: Option<String>,
    /// Its strategy for a busy thread, as submitted.
    pub strategy: Strategy,
    /// What it starts from.
    pub start: Start,
    /// The submitter's metadata.
    pub metadata: serde_json::Value,
    /// Times claimed.
    pub claims: u32,
    /// When its status last changed (a running run: when its worker claimed it), in
    /// milliseconds since the Unix epoch, on the database's clock.
    pub since_ms: i64,
    /// When it was submitted.
    pub created_ms: i64,
    /// When a running run's lease lapses unless renewed.
    pub lease_expires_ms: Option<i64>,
    /// A running run whose lease lapsed: its worker is gone or stalled, and another worker
    /// may claim it.
    pub lapsed: bool,
}

impl RunQueue {
    /// Runs, newest first.
    ///
    /// ```no_run
    /// # async fn demo(queue: stategraph_postgres::queue::RunQueue) -> Result<(), stategraph_postgres::queue::QueueError> {
    /// use stategraph_postgres::queue::RunFilter;
    /// for run in queue.list(&RunFilter::default()).await? {
    ///     println!("{} {} {} {:?}", run.id, run.status, run.thread, run.worker);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, QueueError> {
        let key = filter.thread.as_deref().map(hash16);
        let status = filter.status.map(Status::as_str);
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT {COLUMNS} FROM stategraph_runs
             WHERE ($1::bytea IS NULL OR thread_key = $1) AND ($2::text IS NULL OR status = $2)
             ORDER BY seq DESC LIMIT $3"
        );
        let client = self.client().await?;
        let rows = client
            .query(&sql, &[&key, &status, &limit])
            .await
            .map_err(|e| self.db(e))?;
        rows.iter()
            .filter(|row| {
                // A hash names the thread; its text says for sure.
                let thread: Option<String> = row.try_get(1).ok();
                filter.thread.is_none() || thread == filter.thread
            })
            .map(|row| self.read_info(row))
            .collect()
    }

    /// One run, if there is one with that id.
    pub async fn get(&self, run: RunId) -> Result<Option<RunInfo>, QueueError> {
        let sql = format!("SELECT {COLUMNS} FROM stategraph_runs WHERE id = $1");
        let client = self.client().await?;
        let row = client
            .query_opt(&sql, &[&run.0])
            .await
            .map_err(|e| self.db(e))?;
        row.map(|r| self.read_info(&r)).transpose()
    }

    /// Whether the run was cancelled, or asked to stop (cancelled, interrupted or rolled back
    /// by a newer run): a worker polls it between steps (or reads it from its heartbeats).
    pub async fn is_cancelled(&self, run: RunId) -> Result<bool, QueueError> {
        let info = self.get(run).await?.ok_or(QueueError::NotFound(run))?;
        Ok(info.status == Status::Cancelled || info.stop.is_some())
    }

    fn read_info(&self, row: &tokio_postgres::Row) -> Result<RunInfo, QueueError> {
        let read = || -> Result<RunInfo, tokio_postgres::Error> {
            let status: String = row.try_get(3)?;
            let stop: Option<String> = row.try_get(4)?;
            let strategy: String = row.try_get(7)?;
            let kind: String = row.try_get(8)?;
            let payload: Option<String> = row.try_get(9)?;
            let metadata: String = row.try_get(10)?;
            let claims: i32 = row.try_get(11)?;
            Ok(RunInfo {
                id: RunId(row.try_get(0)?),
                thread: row.try_get(1)?,
                graph: row.try_get(2)?,
                status: Status::parse(&status).unwrap_or(Status::Failed),
                stop: stop.as_deref().and_then(Stop::parse),
                message: row.try_get(5)?,
                worker: row.try_get(6)?,
                strategy: strategy.parse().unwrap_or_default(),
                start: start_of(&kind, payload.as_deref()),
                metadata: serde_json::from_str(&metadata).unwrap_or_default(),
                claims: u32::try_from(claims).unwrap_or(0),
                since_ms: row.try_get(12)?,
                created_ms: row.try_get(13)?,
                lease_expires_ms: row.try_get(14)?,
                lapsed: row.try_get::<_, Option<bool>>(15)?.unwrap_or(false),
            })
        };
        read().map_err(|e| self.db(e))
    }
}
