//! In sync mode a finished task's result is on disk before any result of its step is used, and
//! siblings that finish together are saved in one write (one commit on a database) rather than
//! one each; a sibling that finishes later is saved when it finishes, not held back.

use super::{visit, Log, LogUpdate};
use async_trait::async_trait;
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, Checkpointer, CheckpointerLayer, MemoryCheckpointer,
    PendingWrite,
};
use stategraph::runtime::{Context, Durability, RunConfig};
use stategraph::{StateGraph, END, START};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The memory store, noting how many writes each `put_writes` call carried.
#[derive(Default)]
struct CountingWrites {
    inner: MemoryCheckpointer,
    calls: Mutex<Vec<usize>>,
}

impl CountingWrites {
    fn calls(&self) -> Vec<usize> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl CheckpointerLayer for CountingWrites {
    fn inner(&self) -> &dyn Checkpointer {
        &self.inner
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.calls.lock().unwrap().push(writes.len());
        self.inner
            .put_writes(thread, checkpoint, writes, flush)
            .await
    }
}

/// `split` then five workers in one superstep, worker `i` sleeping `delay(i)` ms.
fn fan_out(delay: fn(usize) -> u64) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("split", |_s: Arc<Log>, _c: Context| async {
        Ok(visit("split"))
    });
    g.add_edge(START, "split");
    for i in 0..5 {
        let name = format!("w{i}");
        let ms = delay(i);
        g.add_node(name.clone(), move |_s: Arc<Log>, _c: Context| {
            let name = name.clone();
            async move {
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Ok(visit(&name))
            }
        });
        g.add_edge("split", format!("w{i}"));
        g.add_edge(format!("w{i}"), END);
    }
    g
}

async fn run(delay: fn(usize) -> u64) -> (Vec<usize>, Log) {
    let store = Arc::new(CountingWrites::default());
    let graph = fan_out(delay)
        .compile()
        .unwrap()
        .with_checkpointer(store.clone());
    let config = RunConfig::new().thread("t").durability(Durability::Sync);
    let out = graph.invoke(LogUpdate::default(), config).await.unwrap();
    (store.calls(), out.state)
}

fn visits_in_task_order() -> Vec<String> {
    ["split", "w0", "w1", "w2", "w3", "w4"]
        .map(String::from)
        .to_vec()
}

#[tokio::test]
async fn siblings_that_finish_together_are_saved_in_one_write() {
    let (calls, out) = run(|_| 0).await;
    assert_eq!(calls, vec![5], "one put_writes carrying the five results");
    assert_eq!(out.visits, visits_in_task_order());
}

#[tokio::test(start_paused = true)]
async fn a_sibling_that_finishes_later_is_saved_when_it_finishes() {
    // w4 first, w0 last, 10 ms apart: each is on disk as it finishes.
    let (calls, out) = run(|i| 10 * (5 - i as u64)).await;
    assert_eq!(calls, vec![1, 1, 1, 1, 1]);
    assert_eq!(
        out.visits,
        visits_in_task_order(),
        "the state does not follow finishing order"
    );
}
