//! Storage grows with what changed, and reading a state replays a bounded chain of deltas.

use crate::backends::Backend;
use crate::common::{entries, Log, LogUpdate, Probe};
use stategraph::checkpoint::{codec, CheckpointId, CheckpointRecord, Checkpointer, StateData};
use stategraph::runtime::{Context, NodeError, RunConfig, SnapshotPolicy};
use stategraph::{StateGraph, END, START};
use std::collections::HashMap;
use std::sync::Arc;

/// Every checkpoint of a thread, newest first.
async fn all_records(store: &dyn Checkpointer, thread: &str) -> Vec<CheckpointRecord> {
    let mut out = Vec::new();
    let mut before = None;
    loop {
        let page = store.list_checkpoints(thread, before, 200).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        out.extend(page);
    }
    out
}

/// For each checkpoint, how many deltas a read of it replays (0 for a snapshot).
fn chain_lengths(records: &[CheckpointRecord]) -> Vec<usize> {
    let by_id: HashMap<CheckpointId, &CheckpointRecord> =
        records.iter().map(|r| (r.id, r)).collect();
    records
        .iter()
        .map(|r| {
            let mut len = 0;
            let mut current = r;
            while !current.state.is_snapshot() {
                len += 1;
                current = by_id[&current.parent_id.expect("a delta has a parent")];
            }
            len
        })
        .collect()
}

/// A graph whose one node appends a 100-byte message per step until there are `len`.
fn chat(len: usize) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("agent", |_s: Arc<Log>, _c: Context| async {
        Ok::<_, NodeError>(LogUpdate::default().steps(vec!["x".repeat(100)]))
    });
    g.add_edge(START, "agent");
    g.add_conditional_edges(
        "agent",
        move |s: &Log| if s.steps.len() < len { "agent" } else { END },
        ["agent", END],
    );
    g
}

pub async fn storage_grows_with_what_changed(backend: &dyn Backend) {
    const STEPS: usize = 1000;
    let saver = backend.saver();
    let graph = chat(STEPS)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("chat"))
        .await
        .unwrap();
    assert_eq!(out.state.steps.len(), STEPS);

    let records = all_records(saver.as_ref(), "chat").await;
    assert_eq!(records.len(), STEPS + 1);
    let stored: usize = records
        .iter()
        .map(|r| codec::encode_checkpoint(r).unwrap().len())
        .sum();
    let snapshots = records.iter().filter(|r| r.state.is_snapshot()).count();
    let final_state = serde_json::to_vec(&out.state).unwrap().len();

    // Storing the whole list at every step would take ~100 * n^2 / 2 bytes (50 MB here).
    let quadratic = 100 * STEPS * (STEPS + 1) / 2;
    assert!(
        stored < quadratic / 50,
        "{stored} bytes stored for {final_state} bytes of state"
    );
    // In fact: one delta per step, plus a few snapshots whose sizes sum to a small multiple of
    // the final state.
    assert!(snapshots <= 16, "{snapshots} snapshots");
    let snapshot_bytes: usize = records
        .iter()
        .filter_map(|r| match &r.state {
            StateData::Snapshot(raw) => Some(raw.get().len()),
            StateData::Delta(_) => None,
        })
        .sum();
    assert!(
        snapshot_bytes <= 4 * final_state,
        "{snapshot_bytes} bytes of snapshots for a {final_state}-byte state"
    );
    assert!(
        stored < 10 * final_state,
        "{stored} bytes stored for {final_state} bytes of state"
    );

    let read = graph.get_state("chat", None).await.unwrap();
    assert_eq!(read.values, out.state);
}

pub async fn replay_stays_bounded_within_and_across_runs(backend: &dyn Backend) {
    let saver = backend.saver();

    // One long run with the default policy: no read replays more than `max_chain` deltas.
    let graph = chat(600)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("long"))
        .await
        .unwrap();
    let lengths = chain_lengths(&all_records(saver.as_ref(), "long").await);
    let max_chain = SnapshotPolicy::default().max_chain as usize;
    assert!(
        lengths.iter().all(|&l| l <= max_chain),
        "longest chain {:?}",
        lengths.iter().max()
    );

    // A tight policy, counted across many short runs on one thread (a chat, turn by turn).
    let tight = SnapshotPolicy {
        max_chain: 8,
        ratio: f64::INFINITY,
        min_ratio: 0.0,
    };
    let probe = Probe::default();
    let mut g = StateGraph::<Log>::new();
    g.add_node("reply", probe.appender("reply"));
    g.add_edge(START, "reply").add_edge("reply", END);
    let turns = g.compile().unwrap().with_checkpointer(saver.clone());
    let mut config = RunConfig::new().thread("turns");
    config.snapshots = tight;
    for turn in 0..50 {
        turns
            .invoke(entries(&[&format!("user {turn}")]), config.clone())
            .await
            .unwrap();
    }
    let records = all_records(saver.as_ref(), "turns").await;
    assert_eq!(records.len(), 100, "an input and a step per turn");
    let lengths = chain_lengths(&records);
    assert!(lengths.iter().all(|&l| l <= 8), "chains {lengths:?}");
    assert!(
        lengths.iter().filter(|&&l| l == 8).count() >= 5,
        "the policy lets chains grow to 8: {lengths:?}"
    );
    let read = turns.get_state("turns", None).await.unwrap();
    assert_eq!(read.values.steps.len(), 100);
    assert_eq!(
        read.values.steps[98..],
        ["user 49".to_string(), "reply".to_string()]
    );
}

pub async fn snapshots_stay_linear_on_long_threads(backend: &dyn Backend) {
    // 4000 appends of 100 bytes: a snapshot every `max_chain` steps whatever its size would
    // store ~16 copies of a growing list (quadratic); snapshots paid for by deltas stay a small
    // multiple of the final state however long the thread gets.
    const STEPS: usize = 4000;
    let saver = backend.saver();
    let graph = chat(STEPS)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let config = RunConfig::new()
        .thread("long-chat")
        .durability(stategraph::runtime::Durability::Async);
    let out = graph.invoke(entries(&[]), config).await.unwrap();
    let final_state = serde_json::to_vec(&out.state).unwrap().len();
    let records = all_records(saver.as_ref(), "long-chat").await;
    let snapshot_bytes: usize = records
        .iter()
        .filter_map(|r| match &r.state {
            StateData::Snapshot(raw) => Some(raw.get().len()),
            StateData::Delta(_) => None,
        })
        .sum();
    assert!(
        snapshot_bytes <= 6 * final_state,
        "{snapshot_bytes} bytes of snapshots for a {final_state}-byte state"
    );
    // Every read replays at most about one state's worth of deltas on top of its snapshot.
    let read = graph.get_state("long-chat", None).await.unwrap();
    assert_eq!(read.values, out.state);
}
