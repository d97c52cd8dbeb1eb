//! The run queue: runs submitted for workers to claim, stored in the same database as the
//! checkpoints (schema version 2, `stategraph_runs`).
//!
//! A run is *submitted* ([`RunQueue::submit`]) for a graph on a thread, with an input or an
//! answer to what the thread waits for; a worker *claims* the oldest one it may run
//! ([`RunQueue::claim`], `FOR UPDATE SKIP LOCKED`, so workers never wait on one another nor
//! claim the same run) under a lease it renews with heartbeats ([`RunQueue::heartbeat`]) and
//! records how it ended ([`RunQueue::finish`]). Each claim draws a new epoch from the sequence
//! that fences the threads' leases, and every later change a worker makes to the run names it:
//! a worker whose lease lapsed and whose run another worker took over changes nothing
//! ([`QueueError::Lost`]).
//!
//! A thread's runs go one at a time, in submission order: a run is claimable only when no
//! earlier run of its thread is queued or running. A submit for a thread that has one follows
//! its [`Strategy`]. A cancellation is stored state ([`RunQueue::cancel`]): a queued run is
//! cancelled at once and never runs; a running one is asked to stop, which its worker reads
//! with each heartbeat and obeys at its next step boundary. A run whose worker died (its lease
//! lapsed) is claimable again, and [`Claimed::stop`] tells its next worker it was asked to stop
//! (so a cancelled run is never resumed). A stop stored holds whatever comes first: a run whose
//! last step ended it before its worker heard the stop is recorded cancelled all the same
//! ([`RunQueue::finish`]), one given back by a draining worker ends cancelled there
//! ([`RunQueue::release`]), and a run given back after it started is rolled back by a worker,
//! never cancelled on the spot with its checkpoints kept.
//!
//! By job: `submit.rs` (submit with its strategy, cancel), `claim.rs` (claim, heartbeat,
//! start, finish, release), `list.rs` (what a person reads: the runs and their state).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use stategraph_postgres::queue::{RunQueue, Strategy, Submission};
//! let queue = RunQueue::connect("postgres://app@db.internal/agents").await?;
//! let run = queue
//!     .submit(Submission::input("memo", serde_json::json!({"company": "Acme"}))
//!         .thread("acme-1")
//!         .strategy(Strategy::Reject))
//!     .await?;
//! println!("{run}: {:?}", queue.get(run).await?.map(|r| r.status));
//! # Ok(()) }
//! ```

mod claim;
mod list;
mod submit;

pub use claim::Claimed;
pub use list::{RunFilter, RunInfo};

use crate::connect::{ConnectError, PostgresOptions, Target};
use stategraph_checkpoint::CheckpointError;
use std::fmt;
use std::sync::Arc;

/// The id of a submitted run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub uuid::Uuid);

impl RunId {
    /// A new id (time-ordered, UUID v7).
    pub fn new() -> RunId {
        RunId(uuid::Uuid::now_v7())
    }
}

impl Default for RunId {
    fn default() -> Self {
        RunId::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for RunId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(RunId)
    }
}

/// What a submit does when its thread already has a run queued or running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Refuse the new run ([`QueueError::Busy`]).
    Reject,
    /// Run it after the thread's other runs.
    #[default]
    Enqueue,
    /// Stop the running one at its next step (its progress kept), cancel the queued ones, and
    /// run the new one from where the thread then is.
    Interrupt,
    /// As `Interrupt`, and drop the checkpoints the running one saved: the new run starts from
    /// where the thread was before it.
    Rollback,
}

/// A run's state in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for a worker.
    Queued,
    /// Claimed by a worker (whose lease may have lapsed: then it is claimable again).
    Running,
    /// Ended waiting for an answer; a resume is a new run.
    Paused,
    /// Reached the graph's end.
    Done,
    /// Failed; [`RunInfo::message`] says why.
    Failed,
    /// Cancelled, interrupted or rolled back; [`RunInfo::message`] says by what.
    Cancelled,
}

/// A stop asked of a running run, obeyed at its next step boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// [`RunQueue::cancel`].
    Cancel,
    /// A newer run of the thread submitted with [`Strategy::Interrupt`].
    Interrupt,
    /// A newer run of the thread submitted with [`Strategy::Rollback`]: the checkpoints this
    /// run saved are to be dropped ([`Claimed::base_checkpoint`] is where the thread was).
    Rollback,
}

/// What a run starts from.
#[derive(Clone, Debug, PartialEq)]
pub enum Start {
    /// A run on this input (JSON, an update of the graph's state), on the thread's newest
    /// checkpoint if it has one.
    Input(serde_json::Value),
    /// The thread's continuation, answering what it waits for with this value (or none: after
    /// a breakpoint).
    Resume(Option<serde_json::Value>),
}

/// How a run ended, as its worker records it ([`RunQueue::finish`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The graph reached its end.
    Done,
    /// The run waits for an answer (a resume is a new run).
    Paused,
    /// The run failed, with why.
    Failed(String),
    /// The run stopped as it was asked to, with by what.
    Cancelled(String),
}

/// A run to submit.
///
/// ```
/// use stategraph_postgres::queue::{Strategy, Submission};
/// let s = Submission::input("memo", serde_json::json!({"company": "Acme"}))
///     .thread("acme-1")
///     .metadata(serde_json::json!({"user": "ann"}))
///     .strategy(Strategy::Interrupt);
/// assert_eq!(s.thread.as_deref(), Some("acme-1"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    /// The graph: a registered name or a graph file, as the registry resolves it.
    pub graph: String,
    /// What the run starts from.
    pub start: Start,
    /// Its thread; a new id when `None`.
    pub thread: Option<String>,
    /// `KEY=VALUE` overrides of the graph file.
    pub overrides: Vec<String>,
    /// The submitter's own data, kept with the run.
    pub metadata: serde_json::Value,
    /// What to do when the thread already has a run.
    pub strategy: Strategy,
}

impl Submission {
    /// A run of `graph` on `input`.
    pub fn input(graph: impl Into<String>, input: serde_json::Value) -> Self {
        Self::new(graph, Start::Input(input))
    }

    /// The continuation of `thread`, answering what it waits for with `answer`.
    pub fn resume(
        graph: impl Into<String>,
        thread: impl Into<String>,
        answer: Option<serde_json::Value>,
    ) -> Self {
        Self::new(graph, Start::Resume(answer)).thread(thread)
    }

    fn new(graph: impl Into<String>, start: Start) -> Self {
        Submission {
            graph: graph.into(),
            start,
            thread: None,
            overrides: Vec::new(),
            metadata: serde_json::json!({}),
            strategy: Strategy::default(),
        }
    }

    /// On this thread.
    pub fn thread(mut self, thread: impl Into<String>) -> Self {
        self.thread = Some(thread.into());
        self
    }

    /// With these `KEY=VALUE` overrides of the graph file.
    pub fn overrides(mut self, overrides: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.overrides.extend(overrides.into_iter().map(Into::into));
        self
    }

    /// With this metadata.
    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = metadata;
        self
    }

    /// With this strategy for a busy thread.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }
}

/// What a queue operation could not do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// A submit with [`Strategy::Reject`] for a thread that has a run queued or running.
    #[error("thread `{thread}` already has run {run} {status}; submit with another strategy (enqueue, interrupt, rollback) or wait for it")]
    Busy {
        /// The thread.
        thread: String,
        /// Its active run.
        run: RunId,
        /// `queued` or `running`.
        status: Status,
    },
    /// No run has this id.
    #[error("no run {0}")]
    NotFound(RunId),
    /// The worker's claim on the run is gone: its lease lapsed and another worker claimed the
    /// run, or it ended otherwise. Nothing was changed.
    #[error(
        "run {run} is no longer this worker's (its claim at epoch {epoch} was taken over or ended)"
    )]
    Lost {
        /// The run.
        run: RunId,
        /// The epoch the worker held.
        epoch: i64,
    },
    /// The run was asked to roll back before its outcome was recorded: drop the checkpoints it
    /// saved since [`Claimed::base_checkpoint`], then record [`Outcome::Cancelled`].
    #[error("run {0} was asked to roll back: its checkpoints must be dropped before it ends")]
    RollbackAsked(RunId),
    /// A submission the queue cannot store.
    #[error("{0}")]
    Invalid(String),
    /// The database failed (the error names host and database).
    #[error(transparent)]
    Database(#[from] CheckpointError),
}

/// The run queue of one database. Cheap to clone: clones share a pool of connections.
#[derive(Clone)]
pub struct RunQueue {
    pool: deadpool_postgres::Pool,
    target: Arc<Target>,
}

impl RunQueue {
    /// Connects to the database at `url`, creating or migrating the schema (see
    /// [`PostgresCheckpointer::connect`](crate::PostgresCheckpointer::connect)).
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(PostgresOptions::new(url)).await
    }

    /// Connects with chosen options.
    pub async fn connect_with(options: PostgresOptions) -> Result<Self, ConnectError> {
        let (pool, target) = crate::connect::open(&options).await?;
        Ok(RunQueue {
            pool,
            target: Arc::new(target),
        })
    }

    pub(crate) fn of(pool: deadpool_postgres::Pool, target: Arc<Target>) -> Self {
        RunQueue { pool, target }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, QueueError> {
        Ok(self
            .pool
            .get()
            .await
            .map_err(|e| self.target.pool_error(e))?)
    }

    fn db(&self, e: tokio_postgres::Error) -> QueueError {
        QueueError::Database(self.target.query_error(&e))
    }
}

impl crate::PostgresCheckpointer {
    /// The run queue of this handle's database, sharing its pool of connections.
    pub fn run_queue(&self) -> RunQueue {
        RunQueue::of(self.pool.clone(), self.target.clone())
    }
}

// The names stored in `stategraph_runs`.

impl Strategy {
    /// Its name: `reject`, `enqueue`, `interrupt`, `rollback`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Reject => "reject",
            Strategy::Enqueue => "enqueue",
            Strategy::Interrupt => "interrupt",
            Strategy::Rollback => "rollback",
        }
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reject" => Ok(Strategy::Reject),
            "enqueue" => Ok(Strategy::Enqueue),
            "interrupt" => Ok(Strategy::Interrupt),
            "rollback" => Ok(Strategy::Rollback),
            other => Err(format!(
                "unknown strategy `{other}`: use reject, enqueue, interrupt or rollback"
            )),
        }
    }
}

impl Status {
    /// Its name: `queued`, `running`, `paused`, `done`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// True for a run that will not run again.
    pub fn is_final(self) -> bool {
        !matches!(self, Status::Queued | Status::Running)
    }

    fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "queued" => Status::Queued,
            "running" => Status::Running,
            "paused" => Status::Paused,
            "done" => Status::Done,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Stop {
    /// Its name: `cancel`, `interrupt`, `rollback`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Cancel => "cancel",
            Stop::Interrupt => "interrupt",
            Stop::Rollback => "rollback",
        }
    }

    /// What a run that stopped as asked is recorded with ([`Outcome::Cancelled`]).
    ///
    /// ```
    /// use stategraph_postgres::queue::Stop;
    /// assert_eq!(Stop::Cancel.message(), "cancelled");
    /// assert!(Stop::Rollback.message().starts_with("rolled back"));
    /// ```
    pub fn message(self) -> &'static str {
        match self {
            Stop::Cancel => "cancelled",
            Stop::Interrupt => "interrupted by a newer run of its thread",
            Stop::Rollback => "rolled back by a newer run of its thread",
        }
    }

    fn parse(s: &str) -> Option<Stop> {
        Some(match s {
            "cancel" => Stop::Cancel,
            "interrupt" => Stop::Interrupt,
            "rollback" => Stop::Rollback,
            _ => return None,
        })
    }
}
