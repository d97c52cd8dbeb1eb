//! What a subgraph costs: a step that runs a 10-node child graph against the same 10 nodes run
//! flat in the parent, without a checkpointer (engine only) and with the memory checkpointer
//! in sync mode (every step, the child's included, saves a checkpoint).
//!
//! `cargo bench --bench subgraph`. Criterion reports time per graph run. Two more modes run on
//! a sled store (the `graph` command's), one store per workload and a new thread per run:
//! `sled_sync`, where each record is a flush, and `sled_async`, where a run flushes once. The nested run does
//! the child's 10 steps plus one parent step, which starts a nested run (its namespace, its
//! first checkpoint) and turns the child's final state into the parent's update; `nested -
//! flat` is that overhead, quoted in BENCHMARKS.md against the cost of one flat step.
//!
//! `mapped` is the same child as a [`Subgraph`] of its own input and output mappings (here
//! trivial), which skips what a same-type child adds: encoding the parent's state as the
//! child's input and measuring what the child changed as JSON; `mapped - flat` is the engine's
//! part of the overhead alone.
//!
//! `one_step` is `nested`'s parent with one plain node in the child's place, writing what the
//! chain's ten steps write: `nested - one_step` is what running the chain inside a step adds to
//! a step that does not, to set beside `flat`, the chain run on its own.
//!
//! Wall-clock time on a shared machine is noisy, so the same workloads also run without
//! criterion for counting instructions: `SUBGRAPH_PROFILE=nested/memory_sync:N` runs N graph
//! runs of one workload on a single-threaded runtime and exits, e.g.
//! `SUBGRAPH_PROFILE=nested/memory_sync:200 valgrind --tool=callgrind target/release/deps/subgraph-*`.
//! The difference between N and 0 runs, divided by N, is the count per run.

use criterion::{criterion_group, BenchmarkId, Criterion};
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{Checkpointer, MemoryCheckpointer};
use stategraph::runtime::{Context, Durability, RunConfig, Subgraph};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_sled::SledCheckpointer;
use std::sync::Arc;
use std::time::Duration;

/// The child's steps.
const STEPS: usize = 10;

#[derive(State, Clone, Default, Serialize, Deserialize)]
struct Count {
    count: u64,
    #[state(append)]
    log: Vec<u64>,
}

/// `START -> n0 -> ... -> n{STEPS-1} -> END`, each node counting and logging.
fn chain() -> StateGraph<Count> {
    let mut g = StateGraph::<Count>::named("chain");
    for i in 0..STEPS {
        g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
            Ok(CountUpdate::default().count(s.count + 1).log(vec![s.count]))
        });
        if i > 0 {
            g.add_edge(format!("n{}", i - 1), format!("n{i}"));
        }
    }
    g.add_edge(START, "n0")
        .add_edge(format!("n{}", STEPS - 1), END);
    g
}

/// `START -> child -> END`, `child` the chain as a node.
fn nested() -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::named("parent");
    g.add_node("child", chain().compile().expect("valid chain"));
    g.add_edge(START, "child").add_edge("child", END);
    g.compile().expect("valid parent")
}

/// `START -> whole -> END`, `whole` one plain node writing what the chain's ten steps write:
/// the parent of `nested` with a function in the child's place, so `nested - one_step` is what
/// running the chain inside a step costs over a step that does not.
fn one_step() -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::named("one_step");
    g.add_node("whole", |s: Arc<Count>, _c: Context| async move {
        let steps = STEPS as u64;
        Ok(CountUpdate::default()
            .count(s.count + steps)
            .log((s.count..s.count + steps).collect::<Vec<_>>()))
    });
    g.add_edge(START, "whole").add_edge("whole", END);
    g.compile().expect("valid one_step")
}

/// `START -> child -> END`, `child` the chain behind input and output mappings.
fn mapped() -> CompiledGraph<Count> {
    let child = Subgraph::new(
        chain().compile().expect("valid chain"),
        |_parent: &Count, _ctx: &Context| Ok(CountUpdate::default()),
        |_parent: &Count, child: Count| CountUpdate::default().count(child.count).log(child.log),
    );
    let mut g = StateGraph::<Count>::named("parent");
    g.add_node("child", child);
    g.add_edge(START, "child").add_edge("child", END);
    g.compile().expect("valid parent")
}

fn config(durability: Durability) -> RunConfig {
    RunConfig::new().durability(durability)
}

/// Where a workload's checkpoints go.
#[derive(Clone)]
enum Saver {
    None,
    /// A fresh memory store per run, so no run reads a store the others grew.
    Memory,
    /// One sled store for the workload's runs, each on a new thread.
    Sled(Arc<dyn Checkpointer>, Durability),
}

/// One graph run of a workload.
async fn run_once(graph: &CompiledGraph<Count>, saver: &Saver) {
    let (store, durability): (Arc<dyn Checkpointer>, _) = match saver {
        Saver::None => {
            let out = graph
                .invoke(CountUpdate::default(), RunConfig::new())
                .await
                .expect("run");
            assert_eq!(out.state.count, STEPS as u64);
            return;
        }
        Saver::Memory => (Arc::new(MemoryCheckpointer::new()), Durability::Sync),
        Saver::Sled(store, durability) => (store.clone(), *durability),
    };
    let saved = graph.clone().with_checkpointer(store);
    let out = saved
        .invoke(CountUpdate::default(), config(durability))
        .await
        .expect("run");
    assert_eq!(out.state.log.len(), STEPS);
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("subgraph");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let flat = chain().compile().expect("valid chain");
    let nested = nested();
    let mapped = mapped();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let one_step = one_step();
    let workloads = [
        ("flat", &flat),
        ("nested", &nested),
        ("mapped", &mapped),
        ("one_step", &one_step),
    ];
    for (name, graph) in workloads {
        let sled: Arc<dyn Checkpointer> =
            Arc::new(SledCheckpointer::open(dir.path().join(name)).expect("a new sled store"));
        let savers = [
            ("no_checkpointer", Saver::None),
            ("memory_sync", Saver::Memory),
            ("sled_sync", Saver::Sled(sled.clone(), Durability::Sync)),
            ("sled_async", Saver::Sled(sled, Durability::Async)),
        ];
        for (mode, saver) in &savers {
            group.bench_function(BenchmarkId::new(*mode, name), |b| {
                b.to_async(&rt).iter(|| run_once(graph, saver))
            });
        }
    }
    group.finish();
}

/// `SUBGRAPH_PROFILE=flat|nested|mapped|one_step/no_checkpointer|memory_sync:N`: N runs of one
/// workload, for an instruction counter (one thread, no criterion, no timing).
fn profile(spec: &str) {
    let usage =
        "SUBGRAPH_PROFILE must be flat|nested|mapped|one_step/no_checkpointer|memory_sync:N";
    let (workload, runs) = spec.rsplit_once(':').expect(usage);
    let (shape, mode) = workload.split_once('/').expect(usage);
    let runs: usize = runs.parse().expect(usage);
    let graph = match shape {
        "flat" => chain().compile().expect("valid chain"),
        "nested" => nested(),
        "mapped" => mapped(),
        "one_step" => one_step(),
        _ => panic!("{usage}"),
    };
    let saver = match mode {
        "no_checkpointer" => Saver::None,
        "memory_sync" => Saver::Memory,
        _ => panic!("{usage}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for _ in 0..runs {
            run_once(&graph, &saver).await;
        }
    });
}

criterion_group!(benches, bench);

fn main() {
    match std::env::var("SUBGRAPH_PROFILE") {
        Ok(spec) => profile(&spec),
        Err(_) => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
