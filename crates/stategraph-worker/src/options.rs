//! What a worker is told: where the database is, how many runs at once, and its clocks.

use stategraph::runtime::SharedStore;
use stategraph_postgres::PostgresOptions;
use std::time::Duration;

/// How a [`Worker`](crate::Worker) connects and paces itself.
///
/// ```
/// use std::time::Duration;
/// use stategraph_worker::WorkerOptions;
/// let options = WorkerOptions::new("postgres://app@db.internal/agents")
///     .concurrency(4)
///     .lease(Duration::from_secs(30));
/// assert_eq!(options.concurrency_of(), 4);
/// ```
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub(crate) postgres: PostgresOptions,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) heartbeat: Duration,
    pub(crate) idle_poll: Duration,
    pub(crate) busy_wait: Duration,
    pub(crate) retries: u32,
    pub(crate) id: Option<String>,
    /// The long-term store its runs' nodes reach (`ctx.store()`).
    pub(crate) long_term: Option<SharedStore>,
}

impl WorkerOptions {
    /// A worker of one run at a time on the database at `url` (see [`PostgresOptions::new`]).
    pub fn new(url: impl Into<String>) -> Self {
        Self::with_postgres(PostgresOptions::new(url))
    }

    /// A worker on a database reached with these options.
    pub fn with_postgres(postgres: PostgresOptions) -> Self {
        WorkerOptions {
            postgres,
            concurrency: 1,
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(1),
            idle_poll: Duration::from_millis(500),
            busy_wait: Duration::from_secs(60),
            retries: 3,
            id: None,
            long_term: None,
        }
    }

    /// Runs at once (1 by default). The pool of connections grows to serve them.
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.concurrency = runs.max(1);
        self
    }

    /// The concurrency set.
    pub fn concurrency_of(&self) -> usize {
        self.concurrency
    }

    /// How long a claimed run, and its thread, stay this worker's without a heartbeat (30 s by
    /// default): after a crash, another worker takes the run over this long after the last
    /// heartbeat. Also the lease of the thread the engine takes.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(100));
        self
    }

    /// How often a running run's lease is renewed and its stop read (1 s by default): a
    /// cancellation is seen this long after it is stored, at worst, and obeyed at the run's
    /// next step boundary. Kept under a third of the lease.
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(10));
        self
    }

    /// How long an idle worker waits before asking the queue again (500 ms by default).
    pub fn idle_poll(mut self, every: Duration) -> Self {
        self.idle_poll = every.max(Duration::from_millis(10));
        self
    }

    /// How long a claimed run waits for its thread while another process holds it (a run
    /// started outside the queue, or a dead worker's lease on another host still running out;
    /// 60 s by default) before it fails saying so.
    pub fn busy_wait(mut self, wait: Duration) -> Self {
        self.busy_wait = wait;
        self
    }

    /// How many claims a run may have (takeovers included) and still be given back to the
    /// queue when the database fails under it mid-run, in its own steps or a subgraph's (3 by
    /// default); past them it is recorded failed with the error. A restart of Postgres costs a
    /// run one claim. A node's failure is never given back: its retry policy decides.
    pub fn retries(mut self, claims: u32) -> Self {
        self.retries = claims;
        self
    }

    /// The worker's name in the queue (by default `{host}:{pid}:{random}`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Gives its runs' nodes this long-term store (`ctx.store()`), as `graph run` gives its own
    /// (none by default: a node that asks for one is told there is none).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::checkpoint::store::MemoryStore;
    /// use stategraph::runtime::SharedStore;
    /// use stategraph_worker::WorkerOptions;
    /// let options = WorkerOptions::new("postgres://app@db.internal/agents")
    ///     .long_term_store(SharedStore(Arc::new(MemoryStore::new())));
    /// # let _ = options;
    /// ```
    pub fn long_term_store(mut self, store: SharedStore) -> Self {
        self.long_term = Some(store);
        self
    }

    /// The heartbeat period used: as set, but at most a third of the lease.
    pub(crate) fn beat(&self) -> Duration {
        self.heartbeat.min(self.lease / 3)
    }
}

/// A worker's default name: where it runs and which process it is, and a random part so two
/// workers of one process differ.
pub(crate) fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &random[..8])
}
