//! Engine overhead without checkpoints: a 100-node chain and a 10-wide fan-out.
//!
//! `cargo bench --bench engine`. Criterion reports time per graph run; divide by the node
//! steps (100 for the chain, 12 for the fan-out) for the per-step cost quoted in BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, RunConfig};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Default, Serialize, Deserialize)]
struct Count {
    count: u64,
}

#[derive(State, Clone, Default, Serialize, Deserialize)]
struct Fan {
    #[state(append)]
    results: Vec<u64>,
}

fn chain(n: usize) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::new();
    for i in 0..n {
        g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
            Ok(CountUpdate::default().count(s.count + 1))
        });
        if i > 0 {
            g.add_edge(format!("n{}", i - 1), format!("n{i}"));
        }
    }
    g.add_edge(START, "n0").add_edge(format!("n{}", n - 1), END);
    g.compile().expect("valid chain")
}

fn fanout(width: u64) -> CompiledGraph<Fan> {
    let mut g = StateGraph::<Fan>::new();
    g.add_node("split", |_s: Arc<Fan>, _c: Context| async {
        Ok(FanUpdate::default())
    });
    let workers: Vec<String> = (0..width).map(|i| format!("w{i}")).collect();
    for (i, w) in workers.iter().enumerate() {
        g.add_node(w.clone(), move |_s: Arc<Fan>, _c: Context| async move {
            Ok(FanUpdate::default().results(vec![i as u64]))
        });
        g.add_edge("split", w.clone());
    }
    g.add_node("join", |s: Arc<Fan>, _c: Context| async move {
        Ok(FanUpdate::default().results(vec![s.results.len() as u64]))
    });
    g.add_join(workers, "join");
    g.add_edge(START, "split").add_edge("join", END);
    g.compile().expect("valid fan-out")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("engine_no_checkpointer");

    let g = chain(100);
    group.throughput(Throughput::Elements(100));
    group.bench_function(BenchmarkId::new("chain", 100), |b| {
        b.to_async(&rt).iter(|| async {
            let out = g
                .invoke(CountUpdate::default(), RunConfig::new())
                .await
                .expect("run");
            assert_eq!(out.state.count, 100);
        })
    });

    let f = fanout(10);
    group.throughput(Throughput::Elements(12));
    group.bench_function(BenchmarkId::new("fanout", 10), |b| {
        b.to_async(&rt).iter(|| async {
            let out = f
                .invoke(FanUpdate::default(), RunConfig::new())
                .await
                .expect("run");
            assert_eq!(out.state.results.len(), 11);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
