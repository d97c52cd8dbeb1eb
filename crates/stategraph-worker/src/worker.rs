//! The claim loop: up to `concurrency` runs at once, each in a task of its own; and draining.

use crate::exec::{self, Ended};
use crate::options::{default_id, WorkerOptions};
use crate::shared::Shared;
use crate::WorkerError;
use stategraph_postgres::queue::RunQueue;
use stategraph_postgres::PostgresCheckpointer;
use stategraph_registry::Registry;
use std::sync::Arc;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A worker of the run queue. Cheap to clone: clones are one worker (so one clone runs it and
/// another drains it).
///
/// ```no_run
/// # async fn demo(registry: stategraph_registry::Registry) -> Result<(), stategraph_worker::WorkerError> {
/// use stategraph_worker::{Worker, WorkerOptions};
/// let worker = Worker::connect(registry, WorkerOptions::new("postgres://app@db/agents")).await?;
/// let running = tokio::spawn({
///     let worker = worker.clone();
///     async move { worker.run().await }
/// });
/// // ... on SIGTERM:
/// worker.drain().await;
/// let report = running.await.expect("the worker's task")?;
/// assert_eq!(report.failed, 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Shared>,
}

/// What a worker's [`run`](Worker::run) did, by how its runs ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs that reached their graph's end.
    pub done: usize,
    /// Runs that paused for an answer.
    pub paused: usize,
    /// Runs that failed (recorded with why).
    pub failed: usize,
    /// Runs that stopped as asked (cancelled, interrupted, rolled back).
    pub cancelled: usize,
    /// Runs given back to the queue: the worker drained, or the database failed under the run
    /// (it continues from its last checkpoint on the next worker free).
    pub released: usize,
    /// Runs this worker lost: another worker took them over after its lease lapsed.
    pub lost: usize,
}

impl WorkerReport {
    fn count(&mut self, ended: Ended) {
        match ended {
            Ended::Done => self.done += 1,
            Ended::Paused => self.paused += 1,
            Ended::Failed => self.failed += 1,
            Ended::Cancelled => self.cancelled += 1,
            Ended::Released => self.released += 1,
            Ended::Lost => self.lost += 1,
        }
    }
}

impl Worker {
    /// Connects to the queue's database (creating or migrating its schema) with a pool sized
    /// for the worker's concurrency.
    pub async fn connect(
        registry: Registry,
        options: WorkerOptions,
    ) -> Result<Worker, WorkerError> {
        // Each run writes one step at a time, and its heartbeats share the pool.
        let connections = 2 * options.concurrency + 2;
        let postgres = options.postgres.clone().pool_size(connections.max(8));
        let store = Arc::new(PostgresCheckpointer::connect_with(postgres).await?);
        let queue = store.run_queue();
        let id = options.id.clone().unwrap_or_else(default_id);
        Ok(Worker {
            inner: Arc::new(Shared {
                registry,
                store,
                queue,
                options,
                id,
                draining: CancellationToken::new(),
                loops: watch::Sender::new(0),
            }),
        })
    }

    /// The worker's name, as the queue lists it beside the runs it claimed.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The queue the worker serves (to submit, list or cancel runs with the same pool).
    pub fn queue(&self) -> &RunQueue {
        &self.inner.queue
    }

    /// The checkpointer its runs are saved in.
    pub fn checkpointer(&self) -> &Arc<PostgresCheckpointer> {
        &self.inner.store
    }

    /// Claims and runs queued runs, `concurrency` at a time, until [`drain`](Self::drain) is
    /// called; then returns once every run it holds is saved and given back. A database that
    /// stops answering is waited for (the runs' leases lapse meanwhile, and they are taken over
    /// as from a worker that died), so a worker outlives a restart of Postgres.
    pub async fn run(&self) -> Result<WorkerReport, WorkerError> {
        let shared = &self.inner;
        shared.loops.send_modify(|n| *n += 1);
        let report = self.claim_loop().await;
        shared.loops.send_modify(|n| *n -= 1);
        Ok(report)
    }

    async fn claim_loop(&self) -> WorkerReport {
        let shared = &self.inner;
        let slots = Arc::new(Semaphore::new(shared.options.concurrency));
        let mut runs: JoinSet<Ended> = JoinSet::new();
        let mut report = WorkerReport::default();
        // Since when the queue cannot be reached: told once when lost and once when back, not
        // at every poll.
        let mut unreachable: Option<std::time::Instant> = None;
        tracing::info!(worker = %shared.id, concurrency = shared.options.concurrency, "worker started");
        loop {
            while let Some(ended) = runs.try_join_next() {
                report.count(ended.unwrap_or(Ended::Lost));
            }
            let permit = tokio::select! {
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
                _ = shared.draining.cancelled() => break,
            };
            if shared.draining.is_cancelled() {
                break;
            }
            let claimed = shared.queue.claim(&shared.id, shared.options.lease).await;
            match (&claimed, unreachable) {
                (Ok(_), Some(since)) => {
                    unreachable = None;
                    let secs = since.elapsed().as_secs_f64();
                    tracing::warn!(worker = %shared.id, "the database answers again after {secs:.1} s; claiming runs");
                }
                (Err(e), None) => {
                    unreachable = Some(std::time::Instant::now());
                    tracing::warn!(worker = %shared.id, error = %e, "cannot claim a run; retrying until the database answers");
                }
                (Err(e), Some(_)) => {
                    tracing::debug!(worker = %shared.id, error = %e, "cannot claim a run")
                }
                (Ok(_), None) => {}
            }
            if let Ok(Some(claimed)) = claimed {
                let shared = self.inner.clone();
                runs.spawn(async move {
                    let ended = exec::execute(&shared, claimed).await;
                    drop(permit);
                    ended
                });
                continue;
            }
            drop(permit);
            tokio::select! {
                _ = tokio::time::sleep(shared.options.idle_poll) => {}
                _ = shared.draining.cancelled() => break,
            }
        }
        // Draining: each run stops at its next step boundary and goes back to the queue.
        while let Some(ended) = runs.join_next().await {
            report.count(ended.unwrap_or(Ended::Lost));
        }
        report
    }

    /// Drains the worker (what SIGTERM asks): it claims nothing more, each run it holds
    /// finishes its current step, saves it and goes back to the queue with its leases let go,
    /// so another worker continues it at once. Returns when [`run`](Self::run) has returned (at
    /// once when it is not running). A worker drained stays drained.
    pub async fn drain(&self) {
        self.inner.draining.cancel();
        let mut loops = self.inner.loops.subscribe();
        let _ = loops.wait_for(|n| *n == 0).await;
    }
}
