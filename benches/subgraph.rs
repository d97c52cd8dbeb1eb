//! What a subgraph costs: a step that runs a 10-node child graph against the same 10 nodes run
//! flat in the parent, without a checkpointer (engine only) and with the memory checkpointer
//! in sync mode (every step, the child's included, saves a checkpoint).
//!
//! `cargo bench --bench subgraph`. Criterion reports time per graph run. The nested run does
//! the child's 10 steps plus one parent step, which starts a nested run (its namespace, its
//! first checkpoint) and turns the child's final state into the parent's update; `nested -
//! flat` is that overhead, quoted in BENCHMARKS.md against the cost of one flat step.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Context, Durability, RunConfig};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
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

fn config() -> RunConfig {
    RunConfig::new().durability(Durability::Sync)
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
    for (name, graph) in [("flat", &flat), ("nested", &nested)] {
        group.bench_function(BenchmarkId::new("no_checkpointer", name), |b| {
            b.to_async(&rt).iter(|| async {
                let out = graph
                    .invoke(CountUpdate::default(), RunConfig::new())
                    .await
                    .expect("run");
                assert_eq!(out.state.count, STEPS as u64);
            })
        });
        group.bench_function(BenchmarkId::new("memory_sync", name), |b| {
            b.to_async(&rt).iter(|| async {
                // A fresh store per run, so no run reads a store the others grew.
                let saved = graph
                    .clone()
                    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
                let out = saved
                    .invoke(CountUpdate::default(), config())
                    .await
                    .expect("run");
                assert_eq!(out.state.log.len(), STEPS);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
