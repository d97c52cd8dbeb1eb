//! A subgraph whose store fails mid-run fails its parent run with that store error
//! (`RunError::Checkpoint`), as the parent's own store failure does, at any depth: a caller (a
//! queue worker) can tell "the database failed" from "a node failed".
//!
//! The store is the in-memory checkpointer behind a switch that makes its writes to subgraph
//! threads fail from the n-th on (or its journal's writes fail), as a database gone mid-run
//! does. A node's journal write that fails is the same store error.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{
    CheckpointError, CheckpointRecord, Checkpointer, CheckpointerLayer, MemoryCheckpointer,
    NAMESPACE_SEPARATOR,
};
use stategraph::runtime::{Context, NodeError, RunConfig, RunError};
use stategraph::{State, StateGraph, END, START};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const OUTAGE: &str = "connection to the database was lost";

/// The memory store whose checkpoints of subgraph threads fail after `allowed` of them.
struct FailingChildren {
    inner: MemoryCheckpointer,
    allowed: usize,
    child_puts: AtomicUsize,
    journal_fails: bool,
}

#[async_trait]
impl CheckpointerLayer for FailingChildren {
    fn inner(&self) -> &dyn Checkpointer {
        &self.inner
    }

    async fn put_checkpoint(
        &self,
        r: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        if r.thread_id.contains(NAMESPACE_SEPARATOR)
            && self.child_puts.fetch_add(1, Ordering::SeqCst) >= self.allowed
        {
            return Err(CheckpointError::Storage(OUTAGE.into()));
        }
        self.inner.put_checkpoint(r, flush).await
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        if self.journal_fails {
            return Err(CheckpointError::Storage(OUTAGE.into()));
        }
        self.inner.put_journal(thread, key, value).await
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Log {
    #[state(append)]
    steps: Vec<String>,
}

/// Nodes `names` in a line, each appending its name and counting its runs in `runs`.
fn line(names: &[&str], runs: &Arc<AtomicUsize>) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    let mut previous = START.to_string();
    for name in names {
        let (runs, name_owned) = (runs.clone(), name.to_string());
        g.add_node(*name, move |_s: Arc<Log>, _c: Context| {
            runs.fetch_add(1, Ordering::SeqCst);
            let name = name_owned.clone();
            async move { Ok::<_, NodeError>(LogUpdate::default().steps(vec![name])) }
        });
        g.add_edge(previous.as_str(), *name);
        previous = name.to_string();
    }
    g.add_edge(previous.as_str(), END);
    g
}

fn store(allowed: usize) -> Arc<FailingChildren> {
    Arc::new(FailingChildren {
        inner: MemoryCheckpointer::new(),
        allowed,
        child_puts: AtomicUsize::new(0),
        journal_fails: false,
    })
}

fn assert_outage(e: &RunError) {
    match e {
        RunError::Checkpoint(CheckpointError::Storage(m)) => assert_eq!(m, OUTAGE),
        other => panic!("expected the child's store error, got {other:?}: {other}"),
    }
}

#[tokio::test]
async fn a_childs_store_failure_fails_the_parent_run_with_that_store_error() {
    let runs = Arc::new(AtomicUsize::new(0));
    let child = line(&["c1", "c2", "c3"], &runs).compile().unwrap();
    let mut parent = line(&["before"], &runs);
    parent.add_node("child", child);
    parent.add_edge("before", "child").add_edge("child", END);
    // The child's input checkpoint and its first step are saved, its second step's is not.
    let saver = store(2);
    let graph = parent.compile().unwrap().with_checkpointer(saver.clone());
    let err = graph
        .invoke(LogUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert_outage(&err);
    // Not retried as a node failure would be: `before`, `c1` and `c2` ran once each.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // The parent's last checkpoint is the one before the step that ran the child.
    let saved = graph.get_state("t", None).await.unwrap();
    assert_eq!(saved.values.steps, vec!["before"]);
}

#[tokio::test]
async fn a_grandchilds_store_failure_reaches_the_top_run_as_a_store_error() {
    let runs = Arc::new(AtomicUsize::new(0));
    let grandchild = line(&["g1", "g2"], &runs).compile().unwrap();
    let mut child = line(&["c1"], &runs);
    child.add_node("grandchild", grandchild);
    child
        .add_edge("c1", "grandchild")
        .add_edge("grandchild", END);
    let mut parent = StateGraph::<Log>::new();
    parent.add_node("child", child.compile().unwrap());
    parent.add_edge(START, "child").add_edge("child", END);
    // The child's input and `c1` are saved; the grandchild's first checkpoint fails.
    let graph = parent.compile().unwrap().with_checkpointer(store(2));
    let err = graph
        .invoke(LogUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert_outage(&err);
}

#[tokio::test]
async fn a_childs_node_failure_is_still_a_node_failure() {
    let mut child = StateGraph::<Log>::new();
    child.add_node("broken", |_s: Arc<Log>, _c: Context| async {
        Err::<LogUpdate, _>(NodeError::new("the tool refused"))
    });
    child.add_edge(START, "broken").add_edge("broken", END);
    let mut parent = StateGraph::<Log>::new();
    parent.add_node("child", child.compile().unwrap());
    parent.add_edge(START, "child").add_edge("child", END);
    let graph = parent
        .compile()
        .unwrap()
        .with_checkpointer(store(usize::MAX));
    let err = graph
        .invoke(LogUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, message, .. }
            if node == "child > broken" && message.contains("the tool refused")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_journal_write_the_store_refuses_fails_the_run_with_that_store_error() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("records", |_s: Arc<Log>, ctx: Context| async move {
        ctx.journal("sent", &"mail #1").await?;
        Ok::<_, NodeError>(LogUpdate::default())
    });
    g.add_edge(START, "records").add_edge("records", END);
    let saver = Arc::new(FailingChildren {
        inner: MemoryCheckpointer::new(),
        allowed: usize::MAX,
        child_puts: AtomicUsize::new(0),
        journal_fails: true,
    });
    let err = g
        .compile()
        .unwrap()
        .with_checkpointer(saver)
        .invoke(LogUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert_outage(&err);
}
