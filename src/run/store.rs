//! What a node sees of the long-term store ([`Context::store`]): reads go to the store, writes
//! are staged with the task and reach the store only with the step's checkpoint.
//!
//! Why staged: a node killed before its step is saved runs again on resume; had its writes
//! gone straight to the store, an item put under a fresh key would then be there twice. So a
//! node's puts and deletes are kept in its task's journal (entry [`TASK_STORE_KEY`], replaced by
//! a new run or attempt of the task); when the step's checkpoint is saved, the run gathers its
//! tasks' entries in task order into one record beside the checkpoint (`{checkpoint}/store`),
//! saves the checkpoint, applies the batch and marks it applied (`{checkpoint}/store/applied`).
//! A resume finding the newest checkpoint's batch unmarked applies it again (puts and deletes
//! are idempotent). The runtime's side is `runtime/executor/store_writes.rs`.
//!
//! Without a checkpointer nothing is resumed, and writes go to the store at once.

use super::context::Context;
use super::store_link::StoreLink;
use crate::checkpoint::store::{
    Item, Namespace, NamespaceQuery, SearchHit, SearchRequest, StoreError, StoreOp,
};
use crate::error::NodeError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The task journal entry holding a task's staged store writes.
pub(crate) const TASK_STORE_KEY: &str = "store/ops";

/// What a task's journal entry [`TASK_STORE_KEY`] holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct StagedWrites {
    pub(crate) run_id: String,
    pub(crate) attempt: u32,
    pub(crate) ops: Vec<StoreOp>,
}

/// A node's handle on the long-term store, from [`Context::store`].
///
/// ```no_run
/// # use stategraph::runtime::{Context, NodeError};
/// # async fn node(ctx: Context) -> Result<(), NodeError> {
/// let Some(store) = ctx.store() else { return Ok(()) };
/// store.put(&["users", "ada"], "lang", serde_json::json!({"likes": "Rust"})).await?;
/// // The node sees its own write at once; other threads see it once the step is saved.
/// assert!(store.get(&["users", "ada"], "lang").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct NodeStore {
    ctx: Context,
    link: Arc<StoreLink>,
}

fn labels(namespace: &[&str]) -> Namespace {
    namespace.iter().map(|s| s.to_string()).collect()
}

fn store_failed(e: StoreError) -> NodeError {
    match e {
        StoreError::Backend(_) | StoreError::Search(_) | StoreError::Locked { .. } => {
            NodeError::transient(e.to_string())
        }
        _ => NodeError::new(e.to_string()),
    }
}

impl NodeStore {
    pub(crate) fn new(ctx: Context, link: Arc<StoreLink>) -> Self {
        NodeStore { ctx, link }
    }

    /// The item, as this task last wrote it or else as the store holds it. A store whose
    /// `TtlConfig::refresh_on_read` is on refreshes its TTL (see [`get_with`](Self::get_with)).
    pub async fn get(&self, namespace: &[&str], key: &str) -> Result<Option<Item>, NodeError> {
        self.get_with(namespace, key, None).await
    }

    /// As [`get`](Self::get), choosing whether the stored item's TTL starts again from now
    /// (LangGraph's `store.get(..., refresh_ttl=)`): `Some(true)` refreshes, `Some(false)` does
    /// not, `None` does what the store's `TtlConfig` says. Unlike a put, a refresh is not staged
    /// with the step: it is written when the node reads, since reading again (a node run again
    /// on resume) only moves the expiry again. A store that cannot refresh refuses
    /// `Some(true)`.
    pub async fn get_with(
        &self,
        namespace: &[&str],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, NodeError> {
        let namespace = labels(namespace);
        let stored = self
            .link
            .store
            .get_with(&namespace, key, refresh_ttl)
            .await
            .map_err(store_failed)?;
        let staged = self.current().await?;
        let mine = staged
            .ops
            .iter()
            .rev()
            .find(|op| op.target() == (&namespace, key));
        Ok(match mine {
            Some(op) => op.item_after(stored.as_ref(), crate::checkpoint::now_ms()),
            None => stored,
        })
    }

    /// Searches the store (what this task staged is not in it yet); the request's
    /// `refresh_ttl` refreshes what it returns as [`get_with`](Self::get_with) does.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, NodeError> {
        self.link.store.search(request).await.map_err(store_failed)
    }

    /// Lists the store's namespaces.
    pub async fn list_namespaces(
        &self,
        query: &NamespaceQuery,
    ) -> Result<Vec<Namespace>, NodeError> {
        self.link
            .store
            .list_namespaces(query)
            .await
            .map_err(store_failed)
    }

    /// Puts an item, kept until deleted.
    pub async fn put(
        &self,
        namespace: &[&str],
        key: &str,
        value: serde_json::Value,
    ) -> Result<(), NodeError> {
        self.stage(StoreOp::Put {
            namespace: labels(namespace),
            key: key.to_string(),
            value,
            ttl_ms: None,
        })
        .await
    }

    /// Puts an item that expires `ttl` after the step that put it is saved.
    pub async fn put_with_ttl(
        &self,
        namespace: &[&str],
        key: &str,
        value: serde_json::Value,
        ttl: Duration,
    ) -> Result<(), NodeError> {
        self.stage(StoreOp::Put {
            namespace: labels(namespace),
            key: key.to_string(),
            value,
            ttl_ms: Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        })
        .await
    }

    /// Deletes an item.
    pub async fn delete(&self, namespace: &[&str], key: &str) -> Result<(), NodeError> {
        self.stage(StoreOp::Delete {
            namespace: labels(namespace),
            key: key.to_string(),
        })
        .await
    }

    /// This attempt's staged writes (empty when another run or attempt wrote the entry).
    async fn current(&self) -> Result<StagedWrites, NodeError> {
        let t = self.ctx.task();
        if t.checkpointer.is_none() {
            return Ok(StagedWrites::default());
        }
        let attempt = self.ctx.attempt();
        let entry: Option<StagedWrites> = self.ctx.journaled(TASK_STORE_KEY).await?;
        Ok(entry
            .filter(|e| e.run_id == *t.run_id && e.attempt == attempt)
            .unwrap_or_else(|| StagedWrites {
                run_id: t.run_id.to_string(),
                attempt,
                ops: Vec::new(),
            }))
    }

    async fn stage(&self, op: StoreOp) -> Result<(), NodeError> {
        op.validate().map_err(|e| NodeError::new(e.to_string()))?;
        let t = self.ctx.task();
        if t.checkpointer.is_none() {
            return self.link.store.batch(&[op]).await.map_err(store_failed);
        }
        let mut entry = self.current().await?;
        entry.ops.push(op);
        self.ctx.journal(TASK_STORE_KEY, &entry).await?;
        self.link
            .note(&t.thread_id, t.checkpoint_id, t.task, entry.attempt);
        Ok(())
    }
}

impl Context {
    /// The long-term store the run was given
    /// ([`RunConfig::with_store`](crate::run::config::RunConfig::with_store)), shared across
    /// threads; `None` without one. Its writes are saved with the step (see [`NodeStore`]).
    pub fn store(&self) -> Option<NodeStore> {
        let link = self.task().inherit.store.clone()?;
        Some(NodeStore::new(self.clone(), link))
    }
}
