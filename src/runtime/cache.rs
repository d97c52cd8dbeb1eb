//! The node cache at run time: a task's key from its input, a hit served instead of running the
//! node, a finished result stored, and the mark a hit leaves for the thread's history.
//!
//! A cache only ever saves work: an entry that is damaged, expired, written for another schema
//! version, or no longer decodes into the state's update type is a miss (logged), and a cache
//! that fails is a miss too. A hit is the node's stored `Command` (update and destinations),
//! merged at the barrier in task order exactly as the node's own result would be, so a hit and
//! a run give the same merged state.
//!
//! Hits are marked in the thread's journal under the task's key at the checkpoint it started
//! from ([`HIT_MARK`]), with the run's id: `history` reads the mark back for the checkpoint that
//! run wrote from there, and a later run from the same checkpoint (a fork, a rerun with the
//! cache bypassed) is not mistaken for the hit.

use crate::checkpoint::{
    default_cache_key, now_ms, CacheEntry, CacheError, CacheKey, CheckpointId, CheckpointRecord,
    Checkpointer, GotoRecord, NodeCache,
};
use crate::graph::{goto_records, gotos_of, Command, Goto, NodeOptions};
use crate::run::context::task_journal_key;
use crate::runtime::persist;
use crate::state::State;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

/// The journal entry (per checkpoint and task) that marks a task's result as a cache hit.
pub(crate) const HIT_MARK: &str = "__cache_hit__";

/// What a cache entry's value holds.
#[derive(Serialize, Deserialize)]
struct Stored {
    /// The state type's schema version the update was written for.
    version: u32,
    update: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    goto: Vec<GotoRecord>,
}

/// The hit mark's value.
#[derive(Serialize, Deserialize)]
struct HitMark {
    run_id: String,
}

/// Where a hit is marked for history.
pub(crate) struct MarkAt {
    pub(crate) store: Arc<dyn Checkpointer>,
    pub(crate) thread: Arc<str>,
    pub(crate) checkpoint: CheckpointId,
    pub(crate) task: usize,
    pub(crate) run_id: Arc<str>,
}

/// One task's view of the cache: its entry's address and how long a result is served.
pub(crate) struct TaskCache {
    cache: Arc<dyn NodeCache>,
    key: CacheKey,
    ttl: Option<Duration>,
    /// The node's declared destinations: a stored command that names another is a miss.
    destinations: Vec<String>,
    mark: Option<MarkAt>,
}

/// The cache of a task of node `node`, when the run has a cache and the node a policy. The key
/// is computed from the task's input: its Send argument, else the state.
pub(crate) fn for_task<S: State>(
    cache: Option<&Arc<dyn NodeCache>>,
    options: &NodeOptions,
    graph: Option<&str>,
    node: &str,
    input: (&S, Option<&serde_json::Value>),
    mark: Option<MarkAt>,
) -> Option<TaskCache> {
    let (cache, policy) = (cache?, options.cache.as_ref()?);
    let key = match (&policy.key, input) {
        (Some(f), (_, Some(arg))) => f(arg),
        (Some(f), (state, None)) => f(&serde_json::to_value(state).ok()?),
        (None, (_, Some(arg))) => default_cache_key(node, &serde_json::to_vec(arg).ok()?),
        (None, (state, None)) => default_cache_key(node, &serde_json::to_vec(state).ok()?),
    };
    Some(TaskCache {
        cache: cache.clone(),
        key: CacheKey::new(graph.unwrap_or_default(), node, key),
        ttl: policy.ttl,
        destinations: options.destinations.clone(),
        mark,
    })
}

impl TaskCache {
    /// The cached command for this input, or `None` for a miss (why is logged).
    pub(crate) async fn lookup<S: State>(&self) -> Option<Command<S>> {
        let entry = match self.cache.get(&self.key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return None,
            // Damage on disk is worth a person's attention; the run goes on either way.
            Err(e @ CacheError::Damaged { .. }) => {
                tracing::error!(error = %e, "running the node instead");
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "node cache lookup failed; running the node");
                return None;
            }
        };
        if entry.is_expired(now_ms()) {
            return None;
        }
        match self.decode::<S>(&entry) {
            Ok(command) => Some(command),
            Err(why) => {
                tracing::info!(entry = %self.key, why, "cached result not used; running the node");
                None
            }
        }
    }

    /// The command an entry holds, if it still fits the state and the node.
    fn decode<S: State>(&self, entry: &CacheEntry) -> Result<Command<S>, String> {
        let stored: Stored = serde_json::from_str(entry.value.get()).map_err(|e| e.to_string())?;
        if stored.version != S::VERSION {
            return Err(format!(
                "it was stored for schema version {}, the state is at {}",
                stored.version,
                S::VERSION
            ));
        }
        let update = persist::decode_named::<S::Update>(stored.update.get())
            .map_err(|e| format!("it no longer fits the state's update type: {e}"))?;
        let goto = gotos_of(&stored.goto);
        for g in &goto {
            let target = match g {
                Goto::Node(n) => n.as_str(),
                Goto::Send(s) => s.node.as_str(),
                Goto::End => crate::graph::END,
            };
            if !self.destinations.iter().any(|d| d == target) {
                return Err(format!(
                    "it goes to `{target}`, no longer a destination of the node"
                ));
            }
        }
        Ok(Command { update, goto })
    }

    /// Stores a finished command. A failure is logged, never the run's: the node did its work.
    pub(crate) async fn store<S: State>(&self, command: &Command<S>) {
        let stored = match serde_json::value::to_raw_value(&command.update) {
            Ok(update) => Stored {
                version: S::VERSION,
                update,
                goto: goto_records(&command.goto),
            },
            Err(e) => {
                tracing::warn!(entry = %self.key, error = %e, "node result not cached");
                return;
            }
        };
        let Ok(value) = serde_json::value::to_raw_value(&stored) else {
            return;
        };
        let now = now_ms();
        let expires = self
            .ttl
            .map(|t| now.saturating_add(t.as_millis().min(u128::from(u64::MAX)) as u64));
        if let Err(e) = self
            .cache
            .put(&self.key, &CacheEntry::new(value, now, expires))
            .await
        {
            tracing::warn!(error = %e, "node result not cached");
        }
    }

    /// Marks the task's result as a hit for the thread's history. Best effort: a lost mark
    /// only loses the word "cached" in a listing.
    pub(crate) async fn mark_hit(&self) {
        let Some(m) = &self.mark else {
            return;
        };
        let key = task_journal_key(m.checkpoint, m.task, HIT_MARK);
        let value = serde_json::json!(HitMark {
            run_id: m.run_id.to_string()
        });
        if let Err(e) = m.store.put_journal(&m.thread, &key, &value).await {
            tracing::warn!(error = %e, "cache hit not marked in the thread's journal");
        }
    }
}

/// The writers of `record` whose results were cache hits, in task order.
pub(crate) async fn hits_of(
    store: &dyn Checkpointer,
    thread: &str,
    record: &CheckpointRecord,
) -> Vec<String> {
    let Some(parent) = record.parent_id else {
        return Vec::new();
    };
    let mut hits = Vec::new();
    for (task, writer) in record.metadata.writers.iter().enumerate() {
        let key = task_journal_key(parent, task, HIT_MARK);
        let Ok(Some(value)) = store.get_journal(thread, &key).await else {
            continue;
        };
        let same_run = serde_json::from_value::<HitMark>(value)
            .is_ok_and(|m| m.run_id == record.metadata.run_id);
        if same_run {
            hits.push(writer.clone());
        }
    }
    hits
}
