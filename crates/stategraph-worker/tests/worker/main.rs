//! Workers against a real Postgres: runs submitted, claimed, run, cancelled, superseded,
//! paused and resumed, drained. Each test has a database of its own; each reads as how a
//! front end (`graph submit`, `graph cancel`, `graph worker`) uses the library.

#[path = "../common/mod.rs"]
mod common;

mod stops;

use common::pg_cluster::{cluster, TestDatabase};
use common::*;
use serde_json::json;
use stategraph_postgres::queue::{RunQueue, Status, Submission};
use stategraph_registry::ErasedGraph;
use stategraph_worker::{Worker, WorkerOptions, WorkerReport};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(30);

/// Options of a quick test worker: a short lease, frequent heartbeats and polls.
fn options(db: &TestDatabase, concurrency: usize) -> WorkerOptions {
    WorkerOptions::new(db.url())
        .concurrency(concurrency)
        .lease(Duration::from_secs(1))
        .heartbeat(Duration::from_millis(50))
        .idle_poll(Duration::from_millis(20))
}

/// A worker running in the background.
struct Running {
    worker: Worker,
    task: JoinHandle<WorkerReport>,
}

impl Running {
    async fn start(db: &TestDatabase, concurrency: usize) -> Running {
        Running::start_with(options(db, concurrency)).await
    }

    async fn start_with(options: WorkerOptions) -> Running {
        let worker = Worker::connect(registry(), options).await.unwrap();
        let task = tokio::spawn({
            let worker = worker.clone();
            async move { worker.run().await.unwrap() }
        });
        Running { worker, task }
    }

    async fn drain(self) -> WorkerReport {
        self.worker.drain().await;
        self.task.await.unwrap()
    }
}

fn steps(thread: &str, target: u32, delay_ms: u64) -> Submission {
    Submission::input("steps", json!({ "target": target }))
        .thread(thread)
        .overrides([format!("delay_ms={delay_ms}")])
}

/// The thread's state, read as any front end reads it: the graph from the registry.
async fn state_of(queue_db: &TestDatabase, thread: &str) -> serde_json::Value {
    let store = stategraph_postgres::PostgresCheckpointer::connect(queue_db.url())
        .await
        .unwrap();
    let graph: Box<dyn ErasedGraph> = registry()
        .resolve("steps", &[])
        .unwrap()
        .build(Some(Arc::new(store)))
        .unwrap();
    graph.get_state(thread, None).await.unwrap().values
}

fn ticks(values: &serde_json::Value) -> usize {
    values["done"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_runs_what_is_submitted_and_records_how_it_ended() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let runs = [
        queue.submit(steps("ok-1", 4, 5)).await.unwrap(),
        queue.submit(steps("ok-2", 2, 5)).await.unwrap(),
        // Fails before it starts: an override the graph file does not take.
        queue
            .submit(Submission::input("steps", json!({})).overrides(["delay_ms=soon"]))
            .await
            .unwrap(),
        queue
            .submit(Submission::input("no-such-graph", json!({})))
            .await
            .unwrap(),
        queue
            .submit(Submission::resume("steps", "never-made", None))
            .await
            .unwrap(),
    ];
    let worker = Running::start(&db, 2).await;
    let ended: Vec<_> = futures_join(&queue, &runs).await;
    assert_eq!(ended[0].status, Status::Done);
    assert_eq!(ended[1].status, Status::Done);
    assert_eq!(ended[2].status, Status::Failed);
    assert!(
        ended[2].message.as_deref().unwrap().contains("delay_ms"),
        "{:?}",
        ended[2]
    );
    assert_eq!(ended[3].status, Status::Failed);
    assert!(ended[3]
        .message
        .as_deref()
        .unwrap()
        .contains("no graph named"));
    assert_eq!(ended[0].worker.as_deref(), Some(worker.worker.id()));

    let expected = serde_json::to_value(uninterrupted(4).await).unwrap();
    assert_eq!(state_of(&db, "ok-1").await, expected);
    let report = worker.drain().await;
    assert_eq!((report.done, report.failed, report.released), (2, 3, 0));
}

async fn futures_join(
    queue: &RunQueue,
    runs: &[stategraph_postgres::queue::RunId],
) -> Vec<stategraph_postgres::queue::RunInfo> {
    let mut ended = Vec::new();
    for run in runs {
        ended.push(wait_final(queue, *run, WAIT).await);
    }
    ended
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_never_run_the_same_run() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let threads: Vec<String> = (0..16).map(|i| format!("pair-{i}")).collect();
    let mut runs = Vec::new();
    for t in &threads {
        runs.push(queue.submit(steps(t, 3, 2)).await.unwrap());
    }
    let (a, b) = (Running::start(&db, 3).await, Running::start(&db, 3).await);
    let ended = futures_join(&queue, &runs).await;
    assert!(ended
        .iter()
        .all(|r| r.status == Status::Done && r.claims == 1));
    for t in &threads {
        // Each step of each thread ran once, in this process that hosts both workers.
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for s in steps_run(t) {
            *counts.entry(s).or_default() += 1;
        }
        assert!(counts.values().all(|&n| n == 1), "thread {t}: {counts:?}");
        assert_eq!(
            counts.len(),
            3,
            "thread {t}: three ticks, each once: {counts:?}"
        );
    }
    let (ra, rb) = (a.drain().await, b.drain().await);
    assert_eq!(ra.done + rb.done, threads.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_run_frees_its_worker_and_a_resume_continues_it() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 1).await;
    let asked = queue
        .submit(Submission::input("ask", json!({})).thread("asked"))
        .await
        .unwrap();
    assert_eq!(wait_final(&queue, asked, WAIT).await.status, Status::Paused);

    // The one slot is free: another run goes while the first waits for its answer.
    let other = queue.submit(steps("meanwhile", 2, 5)).await.unwrap();
    assert_eq!(wait_final(&queue, other, WAIT).await.status, Status::Done);

    let resume = queue
        .submit(Submission::resume("ask", "asked", Some(json!("yes"))))
        .await
        .unwrap();
    assert_eq!(wait_final(&queue, resume, WAIT).await.status, Status::Done);
    let store = stategraph_postgres::PostgresCheckpointer::connect(db.url())
        .await
        .unwrap();
    let graph = registry()
        .resolve("ask", &[])
        .unwrap()
        .build(Some(Arc::new(store)))
        .unwrap();
    let values = graph.get_state("asked", None).await.unwrap().values;
    assert_eq!(values["done"], json!(["answer:yes"]));
    let report = worker.drain().await;
    assert_eq!((report.paused, report.done), (1, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drained_worker_saves_its_step_and_another_continues_at_once() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let run = queue.submit(steps("drained", 30, 40)).await.unwrap();
    let first = Running::start(&db, 1).await;
    wait_for(&queue, run, WAIT, |_| steps_run("drained").len() >= 3).await;
    let report = first.drain().await;
    assert_eq!(report.released, 1);
    let released = queue.get(run).await.unwrap().unwrap();
    assert_eq!((released.status, released.worker), (Status::Queued, None));
    let at_drain = state_of(&db, "drained").await;
    let saved = ticks(&at_drain);
    assert!(
        saved >= 3,
        "the step in flight was finished and saved: {saved}"
    );

    let second = Running::start(&db, 1).await;
    let ended = wait_final(&queue, run, WAIT).await;
    assert_eq!((ended.status, ended.claims), (Status::Done, 2));
    let expected = serde_json::to_value(uninterrupted(30).await).unwrap();
    assert_eq!(state_of(&db, "drained").await, expected);
    // No step ran twice: the drained step was saved before its run was given back, and no
    // node of the step after it began on the first worker.
    let mut seen = std::collections::HashSet::new();
    for step in steps_run("drained") {
        assert!(seen.insert(step), "step {step} ran twice: {at_drain}");
    }
    second.drain().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nodes_transient_failure_is_the_runs_outcome_not_another_claim() {
    use std::sync::atomic::Ordering;
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 1).await;

    // The node's retry policy (none here) decides how often it is tried: the queue does not
    // claim the run again behind it, so one failure is the run's end.
    FLAKY_FAILURES.store(1, Ordering::SeqCst);
    let flaky = Submission::input("flaky", json!({})).thread("flaky-once");
    let run = queue.submit(flaky).await.unwrap();
    let info = wait_final(&queue, run, WAIT).await;
    assert_eq!((info.status, info.claims), (Status::Failed, 1), "{info:?}");
    assert!(
        info.message.as_deref().unwrap().contains("rate limited"),
        "{info:?}"
    );
    assert_eq!(FLAKY_FAILURES.load(Ordering::SeqCst), 0);
    worker.drain().await;
}
