//! A run over a large state: the keyless pipeline with a 6 MB topic (issue 14, item 16). Its
//! templates copy the topic into the title, each heading, each section and the document, so the
//! state ends at ~113 MB of JSON. Each iteration runs the whole graph on a fresh sled store,
//! in sync durability as `graphs/pipeline.toml` sets it.
//!
//! `cargo bench --bench large_state`. Criterion reports the time per run; after it, the bench
//! prints one run's store size (as sled reports it, and as the bytes of its records and pieces)
//! and this process's peak RSS (VmHWM), the figures BENCHMARKS.md quotes.

use criterion::{criterion_group, criterion_main, Criterion};
use stategraph::checkpoint::Checkpointer;
use stategraph::runtime::{Durability, RunConfig};
use stategraph_agents::pipeline::{self, DocUpdate};
use stategraph_sled::SledCheckpointer;
use std::sync::Arc;
use std::time::Duration;

const TOPIC_BYTES: usize = 6 * 1024 * 1024;

/// Words from a fixed xorshift sequence: text that content-defined chunking cuts as it would
/// prose, the same on every run.
fn prose(len: usize) -> String {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        for i in 0..2 + (seed % 8) as usize {
            out.push((b'a' + ((seed >> (8 + 5 * i)) % 26) as u8) as char);
        }
        out.push(' ');
    }
    out.truncate(len);
    out
}

/// The settings of `graphs/pipeline.toml`, without waits or the review pause.
fn config(thread: &str) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .durability(Durability::Sync)
        .setting("step_ms", 0)
        .setting("yes", true)
        .setting("audience", "engineers")
        .setting("title", "A short guide to {topic}")
        .setting(
            "sections",
            serde_json::json!([
                "The case for {topic}",
                "How {topic} works",
                "Getting started with {topic}"
            ]),
        )
        .setting(
            "section_template",
            "{heading}: a plain account for {audience}, with one example and one pitfall.",
        )
}

/// One run on a fresh store; returns the store (still open) and its folder.
async fn run_once(topic: &str) -> (Arc<SledCheckpointer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = Arc::new(SledCheckpointer::open(dir.path().join("store")).expect("a new store"));
    let graph = pipeline::graph()
        .compile()
        .expect("the pipeline compiles")
        .with_checkpointer(store.clone());
    let out = graph
        .invoke(DocUpdate::default().topic(topic.to_string()), config("big"))
        .await
        .expect("the run finishes");
    assert!(out
        .state
        .document
        .is_some_and(|d| d.len() > 6 * TOPIC_BYTES));
    (store, dir)
}

fn large_state(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let topic = prose(TOPIC_BYTES);
    let mut group = c.benchmark_group("large_state");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("pipeline_6mb_topic", |b| {
        b.to_async(&rt).iter(|| run_once(&topic));
    });
    group.finish();

    let (store, dir) = rt.block_on(run_once(&topic));
    rt.block_on(store.flush()).expect("the store flushes");
    let records = store.stored_bytes("big").expect("the store reads");
    let on_disk = store.size_on_disk().expect("the store reads");
    let peak_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .map(|v| v.trim().trim_end_matches(" kB").trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    eprintln!(
        "large_state: store {on_disk} bytes on disk ({records} bytes of records and pieces); \
         peak RSS of this process {peak_kb} kB"
    );
    drop(store);
    drop(dir);
}

criterion_group!(benches, large_state);
criterion_main!(benches);
