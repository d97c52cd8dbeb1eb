//! The background sweeper of a long-running process (a server, a worker): every interval, each
//! graph's `[retention]` policy applied to the store's threads of that graph through [`sweep`],
//! and the long-term store's expired items removed ([`Store::sweep_expired`]).
//!
//! Which graphs have a policy is read again at each round (the registered graphs as their names
//! resolve in the current folder, then the other graph files of `./graphs/`), so a policy edited
//! while the process runs is applied at the next round. A round that removed something is
//! logged (`tracing::info!`), and the newest round, and the newest one that removed something,
//! stay readable through [`SweeperHandle::status`] for the process to show. A failed round (a
//! store that cannot be listed, a panic) is logged as a warning and the next interval tries
//! again: the sweeper never ends the process. It stops when its handle is stopped or dropped,
//! between rounds, never halfway through one.

use crate::{sweep, ErasedGraph, Pruner, Registry, Resolved, RetentionPolicy, Sweep, SweepReport};
use serde::Serialize;
use stategraph::checkpoint::store::{Clock, Store, SystemClock};
use stategraph::checkpoint::Checkpointer;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, OnceCell};

/// What sweeps a process's threads and items in the background.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stategraph::checkpoint::MemoryCheckpointer;
/// use stategraph_registry::{Registry, Sweeper};
/// # async fn demo() {
/// let sweeper = Sweeper::new(Registry::new(), Arc::new(MemoryCheckpointer::new()), Duration::from_secs(3600));
/// let round = sweeper.round().await; // one round now, as each interval runs it
/// assert!(!round.removed_anything());
/// let handle = sweeper.spawn(); // every hour until `handle` is stopped or dropped
/// handle.stop().await;
/// # }
/// ```
pub struct Sweeper {
    registry: Registry,
    store: Arc<dyn Checkpointer>,
    long_term: Option<Arc<dyn Store>>,
    every: Duration,
    clock: Arc<dyn Clock>,
    holder: Option<Arc<dyn Holder>>,
}

/// How a store that holds threads for the process writing them (a folder of threads locks
/// each) is asked for a thread before a sweep prunes it, and told after. A store whose only
/// hold is the engine's lease, which pruning takes itself, needs none.
#[async_trait::async_trait]
pub trait Holder: Send + Sync {
    /// Holds `thread` for this process; refuses one another process writes.
    async fn hold(&self, thread: &str) -> Result<(), String>;
    /// Lets it go.
    fn release(&self, thread: &str) -> Result<(), String>;
}

/// A graph whose threads a sweeper applies a policy to.
#[derive(Clone)]
pub struct Target {
    /// The graph its threads' checkpoints name.
    pub graph: String,
    /// Where the policy was read: a graph file's path, or a registered graph's name for its
    /// built-in file.
    pub source: String,
    /// The policy (never empty).
    pub policy: RetentionPolicy,
    resolved: Resolved,
}

/// One graph's part of a round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphSweep {
    /// The graph.
    pub graph: String,
    /// Where its policy was read.
    pub source: String,
    /// What the sweep did.
    pub report: SweepReport,
}

/// What one round did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweepRound {
    /// When it started, in ms since the epoch.
    pub at_ms: u64,
    /// Each graph with a policy, in order.
    pub graphs: Vec<GraphSweep>,
    /// Expired items removed from the long-term store; `None` without one, or when that failed.
    pub items_expired: Option<usize>,
    /// What failed (a graph whose threads could not be listed, the item sweep); tried again
    /// next round.
    pub failures: Vec<String>,
}

impl SweepRound {
    /// True when a thread was deleted or pruned, or an item removed.
    pub fn removed_anything(&self) -> bool {
        self.items_expired.unwrap_or(0) > 0
            || self
                .graphs
                .iter()
                .any(|g| !g.report.deleted.is_empty() || !g.report.pruned.is_empty())
    }
}

/// What a running sweeper has done so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweeperStatus {
    /// The interval, in seconds.
    pub every_secs: f64,
    /// Rounds completed.
    pub rounds: u64,
    /// The newest round.
    pub last: Option<SweepRound>,
    /// The newest round that removed something.
    pub last_removal: Option<SweepRound>,
}

impl Sweeper {
    /// A sweeper of `store`'s threads by the policies of `registry`'s graphs, every `every`
    /// (at least a second).
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>, every: Duration) -> Self {
        Sweeper {
            registry,
            store,
            long_term: None,
            every: every.max(Duration::from_secs(1)),
            clock: Arc::new(SystemClock),
            holder: None,
        }
    }

    /// Holds each thread through `holder` while pruning it (see [`Holder`]).
    pub fn holder(mut self, holder: Arc<dyn Holder>) -> Self {
        self.holder = Some(holder);
        self
    }

    /// Also removes the expired items of this long-term store each round.
    pub fn long_term(mut self, store: Arc<dyn Store>) -> Self {
        self.long_term = Some(store);
        self
    }

    /// Measures threads' ages against this clock (the system's by default).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The graphs with a policy, as they read now: the registered graphs as their names resolve
    /// in the current folder, then the other graph files of `./graphs/`. A graph file that does
    /// not read has no policy to apply (`graph graphs` says why); a second file for a graph
    /// already taken is left out, with a warning, so one thread is never judged by two policies.
    pub fn targets(&self) -> Vec<Target> {
        let mut named: Vec<String> = self.registry.iter().map(|f| f.name().to_string()).collect();
        // The other graph files, by path (`graphs/NAME.toml` of a registered NAME is read
        // for NAME above).
        named.extend(
            local_files()
                .into_iter()
                .filter(|p| {
                    let stem = p.file_stem().and_then(|s| s.to_str());
                    stem.is_none_or(|s| self.registry.get(s).is_none())
                })
                .filter_map(|p| p.to_str().map(str::to_string)),
        );
        let mut targets: Vec<Target> = Vec::new();
        for name in named {
            let Ok(resolved) = self.registry.resolve(&name, &[]) else {
                continue;
            };
            let Some(policy) = resolved.file.retention.clone().filter(|p| !p.is_empty()) else {
                continue;
            };
            let source = resolved
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| name.clone());
            let graph = resolved.file.graph.clone();
            if let Some(first) = targets.iter().find(|t| t.graph == graph) {
                tracing::warn!(
                    graph,
                    used = first.source,
                    ignored = source,
                    "two graph files give a [retention] policy for one graph: the first is applied"
                );
                continue;
            }
            targets.push(Target {
                graph,
                source,
                policy,
                resolved,
            });
        }
        targets
    }

    /// One round now: each target's policy swept, then the long-term store's expired items.
    pub async fn round(&self) -> SweepRound {
        let mut round = SweepRound {
            at_ms: self.clock.now_ms(),
            ..SweepRound::default()
        };
        for target in self.targets() {
            let pruner = Built {
                resolved: &target.resolved,
                store: self.store.clone(),
                holder: self.holder.clone(),
                graph: OnceCell::new(),
            };
            let swept = sweep(Sweep {
                store: &*self.store,
                graph: &target.graph,
                policy: &target.policy,
                now_ms: self.clock.now_ms(),
                pruner: Some(&pruner),
            })
            .await;
            match swept {
                Ok(report) => round.graphs.push(GraphSweep {
                    graph: target.graph,
                    source: target.source,
                    report,
                }),
                Err(e) => round
                    .failures
                    .push(format!("sweeping the threads of `{}`: {e}", target.graph)),
            }
        }
        if let Some(items) = &self.long_term {
            match items.sweep_expired().await {
                Ok(n) => round.items_expired = Some(n),
                Err(e) => round
                    .failures
                    .push(format!("removing expired store items: {e}")),
            }
        }
        round
    }

    /// Runs a round now, then one every interval, in a task of its own, until the handle is
    /// stopped or dropped.
    pub fn spawn(self) -> SweeperHandle {
        let every = self.every;
        let (status_tx, status) = watch::channel(SweeperStatus {
            every_secs: every.as_secs_f64(),
            ..SweeperStatus::default()
        });
        let (stop, mut stopped) = watch::channel(());
        let sweeper = Arc::new(self);
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    // The sender's drop (the handle's) ends the loop as a stop does.
                    _ = stopped.changed() => break,
                    _ = ticks.tick() => {}
                }
                // A round of its own task: a panic in it is a failed round, not a dead sweeper.
                let one = sweeper.clone();
                let round = match tokio::spawn(async move { one.round().await }).await {
                    Ok(round) => round,
                    Err(e) => SweepRound {
                        at_ms: sweeper.clock.now_ms(),
                        failures: vec![format!("the round failed: {e}")],
                        ..SweepRound::default()
                    },
                };
                log_round(&round);
                status_tx.send_modify(|s| {
                    s.rounds += 1;
                    if round.removed_anything() {
                        s.last_removal = Some(round.clone());
                    }
                    s.last = Some(round);
                });
            }
        });
        SweeperHandle {
            status,
            stop: Some(stop),
            task: Some(task),
        }
    }
}

/// A running sweeper. Dropping it stops the sweeper after the round in progress, if any.
pub struct SweeperHandle {
    status: watch::Receiver<SweeperStatus>,
    stop: Option<watch::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SweeperHandle {
    /// What it has done so far, updated after each round.
    pub fn status(&self) -> watch::Receiver<SweeperStatus> {
        self.status.clone()
    }

    /// Stops it, waiting for the round in progress to end.
    pub async fn stop(mut self) {
        self.stop.take();
        // The task never panics itself (a round's panic is caught); a cancelled runtime is the
        // only other end, and then there is nothing left to wait for.
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SweeperHandle {
    fn drop(&mut self) {
        // Dropping the sender is the stop signal.
        self.stop.take();
    }
}

/// Logs what a round removed, and what failed in it.
fn log_round(round: &SweepRound) {
    for failure in &round.failures {
        tracing::warn!(
            failure,
            "a retention sweep failed; it is tried again next interval"
        );
    }
    for g in &round.graphs {
        let (deleted, pruned, skipped) = (
            g.report.deleted.len(),
            g.report.pruned.len(),
            g.report.skipped.len(),
        );
        if deleted + pruned == 0 {
            continue;
        }
        let threads: Vec<&str> = g.report.deleted.iter().map(|d| d.thread.as_str()).collect();
        tracing::info!(
            graph = g.graph,
            deleted,
            pruned,
            skipped,
            threads = threads.join(","),
            "retention sweep"
        );
    }
    if let Some(items) = round.items_expired.filter(|n| *n > 0) {
        tracing::info!(
            items_expired = items,
            "retention sweep of the store's items"
        );
    }
}

/// Prunes through the graph built over the store, built only when a thread needs pruning.
struct Built<'a> {
    resolved: &'a Resolved,
    store: Arc<dyn Checkpointer>,
    holder: Option<Arc<dyn Holder>>,
    graph: OnceCell<Box<dyn ErasedGraph>>,
}

#[async_trait::async_trait]
impl Pruner for Built<'_> {
    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, String> {
        let Some(holder) = &self.holder else {
            return self.prune_held(thread, keep).await;
        };
        holder.hold(thread).await?;
        let pruned = self.prune_held(thread, keep).await;
        let released = holder.release(thread);
        let pruned = pruned?;
        released?;
        Ok(pruned)
    }
}

impl Built<'_> {
    async fn prune_held(&self, thread: &str, keep: usize) -> Result<usize, String> {
        let graph = self
            .graph
            .get_or_try_init(|| async {
                self.resolved
                    .build(Some(self.store.clone()))
                    .map_err(|e| e.to_string())
            })
            .await?;
        ErasedGraph::prune(graph.as_ref(), thread, keep)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The `.toml` files of `./graphs/`, sorted (as [`Registry::listing`] reads them).
fn local_files() -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir("graphs") else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| Path::new("graphs").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph::checkpoint::store::{FakeClock, MemoryStore, StoreOp};
    use stategraph::checkpoint::MemoryCheckpointer;

    /// Without a policy no graph is swept, and the items past their TTL still go.
    #[tokio::test]
    async fn a_round_removes_expired_items() {
        let clock = Arc::new(FakeClock::at(1_000));
        let items = Arc::new(MemoryStore::with_clock(clock.clone()));
        let ops = [
            StoreOp::put(&["user"], "short", 1.into()).with_ttl_ms(100),
            StoreOp::put(&["user"], "kept", 2.into()),
        ];
        items.batch(&ops).await.unwrap();
        clock.advance(500);
        let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
        let sweeper =
            Sweeper::new(Registry::new(), store, Duration::from_secs(1)).long_term(items.clone());
        let round = sweeper.round().await;
        assert!(round.graphs.is_empty(), "{round:?}");
        assert_eq!(round.items_expired, Some(1));
        assert!(round.removed_anything());
        assert!(items
            .get(&["user".to_string()], "kept")
            .await
            .unwrap()
            .is_some());
        // Spawned, it runs a round at once and keeps it readable.
        let handle = sweeper.spawn();
        let mut status = handle.status();
        status.wait_for(|s| s.rounds >= 1).await.unwrap();
        let now = status.borrow().clone();
        assert_eq!(now.last.unwrap().items_expired, Some(0));
        assert!(now.last_removal.is_none());
        handle.stop().await;
    }
}
