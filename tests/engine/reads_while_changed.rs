//! A read rebuilds a delta checkpoint's state by walking back to its snapshot, one record at a
//! time. A thread deleted, or pruned, between two of those reads is said to be gone, or is read
//! again, never reported damaged; a chain that is broken is still damage.

use super::{visit, Log, LogUpdate};
use async_trait::async_trait;
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, CheckpointerLayer,
    MemoryCheckpointer,
};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, RunConfig, RunError, SnapshotPolicy};
use stategraph::{StateGraph, END, START};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// Passes every call to a memory store; the first read of a checkpoint by id (a walk asking
/// for a parent), once armed, waits until the test has changed the thread.
#[derive(Default)]
struct PausesAParentRead {
    inner: MemoryCheckpointer,
    armed: Mutex<Option<oneshot::Sender<()>>>,
    go_on: Notify,
}

#[async_trait]
impl CheckpointerLayer for PausesAParentRead {
    fn inner(&self) -> &dyn Checkpointer {
        &self.inner
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        let reached = id.and_then(|_| self.armed.lock().unwrap().take());
        if let Some(reached) = reached {
            let _ = reached.send(());
            self.go_on.notified().await;
        }
        self.inner.get_checkpoint(thread, id).await
    }
}

impl PausesAParentRead {
    /// The next read of a checkpoint by id stops; the receiver hears when it does.
    fn arm(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        *self.armed.lock().unwrap() = Some(tx);
        rx
    }
}

/// Five nodes in a row over a state whose snapshot dwarfs each step's update: every checkpoint
/// after the first is a delta on the one before.
async fn five_deltas(store: Arc<PausesAParentRead>, thread: &str) -> CompiledGraph<Log> {
    let names = ["a", "b", "c", "d", "e"];
    let mut g = StateGraph::<Log>::named("chain");
    for name in names {
        g.add_node(name, move |_s: Arc<Log>, _c: Context| async move {
            Ok::<_, NodeError>(visit(name))
        });
    }
    g.add_edge(START, "a");
    for pair in names.windows(2) {
        g.add_edge(pair[0], pair[1]);
    }
    g.add_edge("e", END);
    let graph = g.compile().unwrap().with_checkpointer(store);
    let never = SnapshotPolicy {
        max_chain: 1000,
        ratio: 1e9,
        min_ratio: 1e9,
    };
    let mut config = RunConfig::new().thread(thread);
    config.snapshots = never;
    let big = LogUpdate::default().last("x".repeat(4096));
    graph.invoke(big, config).await.unwrap();
    graph
}

#[tokio::test]
async fn a_thread_deleted_while_its_state_is_read_is_gone_not_damaged() {
    let store = Arc::new(PausesAParentRead::default());
    let graph = five_deltas(store.clone(), "t").await;
    let reached = store.arm();
    let reader = {
        let graph = graph.clone();
        tokio::spawn(async move { graph.get_state("t", None).await })
    };
    reached.await.unwrap();
    store.inner.delete_thread("t").await.unwrap();
    store.go_on.notify_one();
    let read = reader.await.unwrap();
    assert!(
        matches!(read, Err(RunError::ThreadNotFound { .. })),
        "{read:?}"
    );
}

#[tokio::test]
async fn a_thread_pruned_while_its_state_is_read_is_read_again() {
    let store = Arc::new(PausesAParentRead::default());
    let graph = five_deltas(store.clone(), "t").await;
    let whole = graph.get_state("t", None).await.unwrap();
    let reached = store.arm();
    let reader = {
        let graph = graph.clone();
        tokio::spawn(async move { graph.get_state("t", None).await })
    };
    reached.await.unwrap();
    assert!(graph.prune("t", 1).await.unwrap() > 0);
    store.go_on.notify_one();
    let read = reader.await.unwrap().expect("read again after the prune");
    assert_eq!(read.values, whole.values);
}

#[tokio::test]
async fn a_chain_missing_a_parent_is_still_damage() {
    let store = Arc::new(PausesAParentRead::default());
    let graph = five_deltas(store.clone(), "t").await;
    let ids: Vec<CheckpointId> = store
        .inner
        .list_checkpoints("t", None, 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    // The newest's parent, gone for good.
    store
        .inner
        .delete_checkpoints("t", &ids[1..2])
        .await
        .unwrap();
    let read = graph.get_state("t", None).await;
    assert!(
        matches!(
            read,
            Err(RunError::Checkpoint(CheckpointError::Corrupt { .. }))
        ),
        "{read:?}"
    );
}
