//! Retention: a graph file's `[retention]` table, and [`sweep`], which applies it to a store's
//! threads of that graph and says what it removed.
//!
//! ```toml
//! [retention]
//! keep_days = 90           # any thread not updated for 90 days is deleted
//! finished_days = 14       # a finished (done) thread is deleted 14 days after its last update
//! keep_checkpoints = 5     # a finished thread keeps only its newest 5 checkpoints
//! include_paused = false   # paused threads (waiting for a person) are never touched unless true
//! items_ttl_days = 30      # a store item this graph's runs put without a TTL expires in 30 days
//! items_refresh_on_read = true  # a run's read of an item starts its TTL again
//! ```
//!
//! Days may be fractional (`0.5` is twelve hours). The item settings are a
//! [`TtlConfig`](stategraph::checkpoint::store::TtlConfig) ([`RetentionPolicy::items_ttl`]) the
//! runs' long-term store applies; expired items are removed by the store's `sweep_expired`,
//! which `graph prune --policy` and the background sweeper call beside [`sweep`].
//!
//! A thread being written is never swept: a thread whose lease is live is skipped, a deletion
//! first takes the thread's lease itself (so a run starting meanwhile is refused, or wins and
//! the thread is skipped), and a prune goes through the graph, which takes it too. A store
//! that holds threads some other way (the folder store's locks) refuses the deletion of a held
//! thread, which is then reported as skipped. The time is the caller's (`now_ms`), so a test
//! passes a fake clock and a server passes the real one.

use crate::ErasedGraph;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::store::{TtlConfig, WithTtl};
use stategraph::checkpoint::{
    is_root_thread, summarize, CheckpointError, Checkpointer, Lease, ThreadStatus,
};
use stategraph::runtime::SharedStore;
use std::sync::Arc;

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// A graph file's `[retention]` table. Every rule is off unless given.
///
/// ```
/// use stategraph_registry::GraphFile;
/// let file = GraphFile::parse("graph = \"g\"\n[retention]\nfinished_days = 7\nkeep_checkpoints = 3\nitems_ttl_days = 0.5\n", "inline", &[]).unwrap();
/// let policy = file.retention.unwrap();
/// assert_eq!((policy.finished_days, policy.keep_checkpoints), (Some(7.0), Some(3)));
/// assert!(!policy.include_paused);
/// assert_eq!(policy.items_ttl().default_ttl_ms, Some(12 * 60 * 60 * 1000));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicy {
    /// Delete any thread (finished or not) this many days after its last update (fractional
    /// days allowed).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "days"
    )]
    pub keep_days: Option<f64>,
    /// Delete a finished thread this many days after its last update.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "days"
    )]
    pub finished_days: Option<f64>,
    /// Keep only the newest this many checkpoints of a finished thread (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_checkpoints: Option<usize>,
    /// Apply the rules to paused threads too (waiting for a person); off by default.
    #[serde(default)]
    pub include_paused: bool,
    /// The time to live, in days, of a long-term store item this graph's runs put without one
    /// (`None`: such items stay until deleted).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "days"
    )]
    pub items_ttl_days: Option<f64>,
    /// Whether this graph's runs reading an item (get, search) start its TTL again, unless the
    /// read says otherwise; off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub items_refresh_on_read: bool,
}

impl RetentionPolicy {
    /// True when no thread rule is set: [`sweep`] would remove no thread. (The item settings
    /// apply to the runs' store, not to a sweep: see [`items_ttl`](Self::items_ttl).)
    pub fn is_empty(&self) -> bool {
        self.keep_days.is_none() && self.finished_days.is_none() && self.keep_checkpoints.is_none()
    }

    /// How the runs' long-term store treats item TTLs under this policy.
    ///
    /// ```
    /// use stategraph_registry::RetentionPolicy;
    /// let policy = RetentionPolicy { items_ttl_days: Some(1.0), items_refresh_on_read: true, ..Default::default() };
    /// let ttl = policy.items_ttl();
    /// assert_eq!((ttl.default_ttl_ms, ttl.refresh_on_read), (Some(86_400_000), true));
    /// ```
    pub fn items_ttl(&self) -> TtlConfig {
        TtlConfig {
            default_ttl_ms: self.items_ttl_days.map(days_ms),
            refresh_on_read: self.items_refresh_on_read,
        }
    }

    /// The long-term store as a run of a graph with `policy` sees it: `shared`, the store every
    /// run of the process shares, with the policy's item settings ([`items_ttl`](Self::items_ttl))
    /// as its defaults; `shared` itself for a graph without a policy.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::checkpoint::store::MemoryStore;
    /// use stategraph::runtime::SharedStore;
    /// use stategraph_registry::RetentionPolicy;
    /// let shared = SharedStore(Arc::new(MemoryStore::new()));
    /// let policy = RetentionPolicy { items_ttl_days: Some(30.0), ..Default::default() };
    /// let for_runs = RetentionPolicy::store_for_runs(Some(&policy), &shared);
    /// # let _ = for_runs;
    /// ```
    pub fn store_for_runs(policy: Option<&RetentionPolicy>, shared: &SharedStore) -> SharedStore {
        match policy {
            Some(policy) => {
                SharedStore(Arc::new(WithTtl::new(shared.0.clone(), policy.items_ttl())))
            }
            None => shared.clone(),
        }
    }
}

/// Days as milliseconds (whole: a fraction of a millisecond is dropped).
fn days_ms(days: f64) -> u64 {
    // `days` is checked finite and not negative when read; `as` saturates past u64::MAX.
    (days * DAY_MS as f64) as u64
}

/// A days field: a number (whole or fractional), not negative.
fn days<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let days = f64::deserialize(d)?;
    if !days.is_finite() || days < 0.0 {
        return Err(serde::de::Error::custom(format!(
            "{days} is not a number of days: give 0 or more (fractions allowed, 0.5 is 12 hours)"
        )));
    }
    Ok(Some(days))
}

/// What a sweep did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweepReport {
    /// Threads deleted, with the rule that deleted each.
    pub deleted: Vec<Removed>,
    /// Threads whose oldest checkpoints were removed, with how many.
    pub pruned: Vec<Pruned>,
    /// Threads a rule applied to but that were left alone, with why (held by a writer).
    pub skipped: Vec<Skipped>,
}

/// A thread a sweep deleted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Removed {
    pub thread: String,
    /// `keep_days` or `finished_days`.
    pub rule: &'static str,
    /// Days since its last update.
    pub idle_days: u64,
}

/// A thread a sweep pruned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pruned {
    pub thread: String,
    /// Checkpoints removed.
    pub removed: usize,
}

/// A thread a sweep left alone although a rule applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    pub thread: String,
    pub reason: String,
}

/// One sweep's inputs: the store, whose threads of `graph` the policy applies to.
pub struct Sweep<'a> {
    /// The store the threads are in.
    pub store: &'a dyn Checkpointer,
    /// The graph whose threads are swept (as their checkpoints name it).
    pub graph: &'a str,
    /// Its graph file's `[retention]`.
    pub policy: &'a RetentionPolicy,
    /// Now, in ms since the epoch (a fake clock in tests).
    pub now_ms: u64,
    /// The graph built over `store`, for `keep_checkpoints` (pruning rewrites kept
    /// checkpoints that lean on removed ones, which takes the graph's reducers). Without it,
    /// threads over the limit are reported as skipped.
    pub pruner: Option<&'a dyn Pruner>,
}

/// What keeps the newest checkpoints of a thread: its graph ([`ErasedGraph::prune`], which
/// takes the thread's lease), or a caller's wrapper that holds the thread its own way first.
#[async_trait::async_trait]
pub trait Pruner: Send + Sync {
    /// Keeps the newest `keep` checkpoints of `thread`; returns how many were removed. Refuses
    /// a thread being written.
    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, String>;
}

#[async_trait::async_trait]
impl<G: ErasedGraph + ?Sized> Pruner for G {
    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, String> {
        ErasedGraph::prune(self, thread, keep)
            .await
            .map_err(|e| e.to_string())
    }
}

/// What to do with one thread.
enum Action {
    Delete(&'static str, u64),
    Prune(usize),
}

/// Applies a policy to the store's threads of one graph. A thread that fails (a damaged one) is
/// reported as skipped with its error; the sweep goes on with the others.
///
/// ```
/// use stategraph::checkpoint::MemoryCheckpointer;
/// use stategraph_registry::{sweep, RetentionPolicy, Sweep};
/// # async fn demo() {
/// let store = MemoryCheckpointer::new();
/// let policy = RetentionPolicy { finished_days: Some(7.0), ..Default::default() };
/// let report = sweep(Sweep { store: &store, graph: "chat", policy: &policy, now_ms: 0, pruner: None })
///     .await
///     .unwrap();
/// assert!(report.deleted.is_empty());
/// # }
/// ```
pub async fn sweep(s: Sweep<'_>) -> Result<SweepReport, CheckpointError> {
    let mut report = SweepReport::default();
    if s.policy.is_empty() {
        return Ok(report);
    }
    for thread in s.store.list_threads().await? {
        if !is_root_thread(&thread) {
            continue;
        }
        let skip = |reason: String| Skipped {
            thread: thread.clone(),
            reason,
        };
        let action = match decide(&s, &thread).await {
            Ok(Some(action)) => action,
            Ok(None) => continue,
            Err(e) => {
                report.skipped.push(skip(e.to_string()));
                continue;
            }
        };
        match action {
            Action::Delete(rule, idle_days) => {
                match delete_unheld(s.store, &thread, s.now_ms).await {
                    Ok(()) => report.deleted.push(Removed {
                        thread: thread.clone(),
                        rule,
                        idle_days,
                    }),
                    Err(e) => report.skipped.push(skip(e.to_string())),
                }
            }
            Action::Prune(keep) => {
                let Some(graph) = s.pruner else {
                    report.skipped.push(skip(format!(
                        "it has more than {keep} checkpoints, and pruning needs its graph"
                    )));
                    continue;
                };
                match graph.prune(&thread, keep).await {
                    Ok(0) => {}
                    Ok(removed) => report.pruned.push(Pruned {
                        thread: thread.clone(),
                        removed,
                    }),
                    Err(e) => report.skipped.push(skip(e)),
                }
            }
        }
    }
    Ok(report)
}

/// Which rule applies to a thread, if any. Reads its newest checkpoint, the writes on it and
/// its lease: nothing is written.
async fn decide(s: &Sweep<'_>, thread: &str) -> Result<Option<Action>, CheckpointError> {
    let Some(summary) = summarize(s.store, thread).await? else {
        return Ok(None);
    };
    if summary.graph.as_deref() != Some(s.graph) {
        return Ok(None);
    }
    if summary.status == ThreadStatus::Paused && !s.policy.include_paused {
        return Ok(None);
    }
    let idle_ms = s.now_ms.saturating_sub(summary.updated_at_ms);
    let idle_days = idle_ms / DAY_MS;
    let past = |days: Option<f64>| days.is_some_and(|d| idle_ms > days_ms(d));
    let finished = summary.status == ThreadStatus::Done;
    if past(s.policy.keep_days) {
        return Ok(Some(Action::Delete("keep_days", idle_days)));
    }
    if finished && past(s.policy.finished_days) {
        return Ok(Some(Action::Delete("finished_days", idle_days)));
    }
    if let (true, Some(keep)) = (finished, s.policy.keep_checkpoints) {
        let keep = keep.max(1);
        let page = s.store.list_checkpoints(thread, None, keep + 1).await?;
        if page.len() > keep {
            return Ok(Some(Action::Prune(keep)));
        }
    }
    Ok(None)
}

/// Deletes a thread after claiming its lease, so that no run writes it meanwhile: a live lease
/// (or a claim lost to a run starting now) is [`CheckpointError::ThreadBusy`].
async fn delete_unheld(
    store: &dyn Checkpointer,
    thread: &str,
    now_ms: u64,
) -> Result<(), CheckpointError> {
    let busy = |held: &Lease| CheckpointError::ThreadBusy {
        thread: thread.to_string(),
        pid: held.pid,
        host: held.host.clone(),
        expires_in_ms: held.expires_at_ms.saturating_sub(now_ms),
    };
    let current = store.get_lease(thread).await?;
    // Compared with the real clock too: a fake one in the future must not take a live lease.
    let real_now = stategraph::checkpoint::now_ms();
    if let Some(held) = &current {
        if held.expires_at_ms > now_ms.min(real_now) {
            return Err(busy(held));
        }
    }
    let mine = Lease {
        owner: format!("retention-sweep-{}-{real_now}", std::process::id()),
        pid: std::process::id(),
        host: "retention sweep".into(),
        expires_at_ms: real_now + 15_000,
    };
    match store
        .swap_lease(thread, current.as_ref(), Some(&mine))
        .await?
    {
        Ok(()) => store.delete_thread(thread).await,
        Err(Some(held)) => Err(busy(&held)),
        Err(None) => Err(CheckpointError::ThreadBusy {
            thread: thread.to_string(),
            pid: 0,
            host: String::new(),
            expires_in_ms: 0,
        }),
    }
}
