//! Postgres restarted as a crash would (`pg_ctl restart -m immediate`) while workers run: every
//! connection is cut mid-step. The workers outlive it: runs whose writes failed go back to the
//! queue (or their leases lapse) and continue from their last checkpoints, and every run ends as
//! an uninterrupted run would, its thread's checkpoints one chain.
//!
//! A test binary of its own: the restart cuts every connection of its cluster.

mod common;

use common::pg_cluster::cluster;
use common::*;
use serde_json::json;
use stategraph::checkpoint::Checkpointer;
use stategraph_postgres::queue::{RunQueue, Status, Submission};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_worker::{Worker, WorkerOptions};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_outlive_a_restart_of_postgres_and_every_run_finishes() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let threads: Vec<String> = (0..4).map(|i| format!("restart-{i}")).collect();
    let mut runs = Vec::new();
    for t in &threads {
        let submission = Submission::input("steps", json!({ "target": 30 }))
            .thread(t)
            .overrides(["delay_ms=20"]);
        runs.push(queue.submit(submission).await.unwrap());
    }
    let mut workers = Vec::new();
    for _ in 0..2 {
        let options = WorkerOptions::new(db.url())
            .concurrency(2)
            .lease(Duration::from_secs(1))
            .heartbeat(Duration::from_millis(50))
            .idle_poll(Duration::from_millis(20))
            .retries(20);
        let worker = Worker::connect(registry(), options).await.unwrap();
        let task = tokio::spawn({
            let worker = worker.clone();
            async move { worker.run().await.unwrap() }
        });
        workers.push((worker, task));
    }
    let progress = || threads.iter().map(|t| steps_run(t).len()).sum::<usize>();
    while progress() < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::task::spawn_blocking(|| cluster().restart_now())
        .await
        .unwrap()
        .unwrap();

    let expected = serde_json::to_value(uninterrupted(30).await).unwrap();
    let mut claims = 0;
    for (run, thread) in runs.iter().zip(&threads) {
        // The queue's own connections were cut too: a new handle asks.
        let info = loop {
            match RunQueue::connect(db.url()).await {
                Ok(q) => break wait_final(&q, *run, Duration::from_secs(60)).await,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert_eq!(info.status, Status::Done, "{info:?}");
        claims += info.claims;
        let store = PostgresCheckpointer::connect(db.url()).await.unwrap();
        let chain = store.list_checkpoints(thread, None, 1000).await.unwrap();
        for pair in chain.windows(2) {
            assert_eq!(
                pair[0].parent_id,
                Some(pair[1].id),
                "{thread}: a forked chain"
            );
        }
        let graph = registry()
            .resolve("steps", &[])
            .unwrap()
            .build(Some(Arc::new(store)))
            .unwrap();
        let state = graph.get_state(thread, None).await.unwrap();
        assert_eq!(state.values, expected, "{thread}");
    }
    for (worker, task) in workers {
        worker.drain().await;
        task.await.unwrap();
    }
    eprintln!("4 runs through a restart of Postgres: {claims} claims in all");
}
