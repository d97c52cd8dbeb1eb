//! What one server run costs the per-thread folder store, without the server: a probe of the
//! store's open, per-step flush (with its flush witness) and close, as `graph serve` drives
//! them for a 10-step run (`POST /threads` creates the thread, the run holds it, writes ten
//! checkpoints each flushed as sync durability does, and lets it go).
//!
//! ```text
//! cargo run --release -p stategraph-sled --example thread_lifecycle -- [RUNS] [CLIENTS] [DIR]
//! ```
//!
//! `CLIENTS` tasks share a two-thread runtime (as the CLI's), each doing `RUNS / CLIENTS` runs.
//! It prints runs per second and the mean time of each part per run.

use stategraph_checkpoint::{
    CheckpointId, CheckpointMetadata, CheckpointRecord, Checkpointer, Frontier, Source, StateData,
};
use stategraph_sled::FolderCheckpointer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const STEPS: u64 = 10;

fn record(thread: &str, step: u64, parent: Option<CheckpointId>) -> CheckpointRecord {
    CheckpointRecord {
        thread_id: thread.to_string(),
        id: CheckpointId::now_v7(),
        parent_id: parent,
        step,
        state: StateData::Snapshot(
            serde_json::value::to_raw_value(&serde_json::json!({ "count": step })).expect("json"),
        ),
        frontier: Frontier::default(),
        metadata: CheckpointMetadata {
            source: Source::Loop,
            writers: vec![],
            created_at_ms: stategraph_checkpoint::now_ms(),
            schema_version: 0,
            run_id: "r".into(),
            graph: None,
        },
    }
}

#[derive(Default)]
struct Times {
    create: AtomicU64,
    hold: AtomicU64,
    steps: AtomicU64,
    release: AtomicU64,
}

fn add(at: &AtomicU64, since: Instant) {
    at.fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
}

async fn one_run(store: &FolderCheckpointer, thread: &str, times: &Times) {
    let t = Instant::now();
    store.create(thread).await.expect("create");
    let first = record(thread, 0, None);
    store.put_checkpoint(&first, true).await.expect("input");
    store.release(thread).expect("release");
    add(&times.create, t);

    let t = Instant::now();
    store.hold(thread).await.expect("hold");
    add(&times.hold, t);
    let t = Instant::now();
    let mut parent = first.id;
    for step in 1..=STEPS {
        let r = record(thread, step, Some(parent));
        store.put_checkpoint(&r, true).await.expect("step");
        parent = r.id;
    }
    add(&times.steps, t);
    let t = Instant::now();
    store.release(thread).expect("release");
    add(&times.release, t);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let clients: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let dir = match args.get(2) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("thread-lifecycle-{}", std::process::id())),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store = Arc::new(FolderCheckpointer::open(&dir).expect("open"));
    let times = Arc::new(Times::default());
    let started = Instant::now();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..clients {
            let store = store.clone();
            let times = times.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..runs / clients {
                    one_run(&store, &format!("t-{c}-{n}"), &times).await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let done = (runs / clients) * clients;
    let per = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / done as f64 / 1e3;
    println!(
        "{done} runs, {clients} clients: {:.1} runs/s; per run ms (wall, summed over clients): create {:.2}, hold {:.2}, {STEPS} steps {:.2}, release {:.2}",
        done as f64 / elapsed,
        per(&times.create),
        per(&times.hold),
        per(&times.steps),
        per(&times.release),
    );
    store.close();
    if args.get(2).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
