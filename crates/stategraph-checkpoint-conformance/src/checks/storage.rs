//! Storage grows with what changed, and reading a state replays a bounded chain of deltas.

use crate::backends::Backend;
use crate::common::{chat, entries, Log, LogUpdate, Probe};
use stategraph::checkpoint::{
    CheckpointId, CheckpointRecord, Checkpointer, PendingKind, StateData,
};
use stategraph::runtime::{Context, Durability, NodeError, RunConfig, SnapshotPolicy};
use stategraph::{Route, Send, StateGraph, END, START};
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
    let stored = backend.stored_bytes("chat") as usize;
    let final_state = serde_json::to_vec(&out.state).unwrap().len();
    // Storing the whole list at every step would take ~100 * n^2 / 2 bytes (50 MB here); in
    // fact a step costs its delta, plus a few snapshots (stored whole at this size) whose
    // sizes sum to a small multiple of the final state.
    assert!(
        stored < 10 * final_state,
        "{stored} bytes stored for {final_state} bytes of state"
    );
    let snapshots = records.iter().filter(|r| r.state.is_snapshot()).count();
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
    // 8000 appends of 100 bytes, to an 800 KB state. A snapshot every `max_chain` steps, each
    // stored whole, would store ~30 copies of a growing list (quadratic). Small states are
    // snapshotted whole, paid for by deltas worth a fixed fraction of them; large ones are
    // stored as pieces shared with the last snapshot, so they cost what changed.
    const STEPS: usize = 8000;
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
    let stored = backend.stored_bytes("long-chat") as usize;
    // Deltas are ~2.2x the state (a 100-byte message, its JSON and the checkpoint around it).
    assert!(
        stored <= 6 * final_state,
        "{stored} bytes stored for a {final_state}-byte state"
    );
    let snapshot_bytes: usize = records
        .iter()
        .filter_map(|r| match &r.state {
            StateData::Snapshot(raw) => Some(raw.get().len()),
            StateData::Delta(_) => None,
        })
        .sum();
    assert!(
        snapshot_bytes > 2 * stored,
        "{snapshot_bytes} bytes of snapshots read back from {stored} stored"
    );
    // Once snapshots share pieces they are cheap to store, so they come as often as encoding
    // the whole state allows (each 1/16 of it in deltas, ~420 steps here) and reads stay short;
    // kept whole, they would wait for a quarter of the state (~1,700 steps).
    let lengths = chain_lengths(&records);
    let newest = &lengths[..2000];
    assert!(
        newest.iter().all(|&l| l <= 512),
        "longest chain among the newest: {:?}",
        newest.iter().max()
    );
    let read = graph.get_state("long-chat", None).await.unwrap();
    assert_eq!(read.values, out.state);
}

pub async fn pruning_and_deleting_free_the_pieces_of_large_snapshots(backend: &dyn Backend) {
    // 3000 messages (~300 KB): the state is large enough to be stored as shared pieces.
    let saver = backend.saver();
    let graph = chat(3000)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("big"))
        .await
        .unwrap();
    let final_state = serde_json::to_vec(&out.state).unwrap().len();
    let before = backend.stored_bytes("big") as usize;

    // The kept checkpoints lean on pruned ones, so the oldest kept one becomes a snapshot that
    // shares the pieces it can with the snapshots kept.
    let kept: Vec<CheckpointId> = all_records(saver.as_ref(), "big").await[..10]
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(graph.prune("big", 10).await.unwrap(), 2991);
    for (i, id) in kept.iter().enumerate() {
        let read = graph.get_state("big", Some(*id)).await.unwrap();
        assert_eq!(read.values.steps.len(), 3000 - i);
    }

    // Down to one checkpoint, a snapshot: every piece only pruned snapshots held is gone. What
    // is left is that snapshot's pieces and index, ~0.3% over the state; the pieces only pruned
    // snapshots held (their last pieces and indexes) were another ~11%.
    assert_eq!(graph.prune("big", 1).await.unwrap(), 9);
    let after = backend.stored_bytes("big") as usize;
    assert!(
        after < final_state + final_state / 50,
        "{after} bytes left for one {final_state}-byte snapshot ({before} before)"
    );
    assert_eq!(
        graph.get_state("big", None).await.unwrap().values,
        out.state
    );

    graph.delete_thread("big").await.unwrap();
    assert_eq!(backend.stored_bytes("big"), 0);
}

/// Text of `len` bytes that content-defined chunking can cut (no long runs of one pattern),
/// the same on every call.
fn prose(len: usize) -> String {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let word = 2 + (seed % 8) as usize;
        for i in 0..word {
            out.push((b'a' + ((seed >> (8 + 5 * i)) % 26) as u8) as char);
        }
        out.push(' ');
    }
    out.truncate(len);
    out
}

pub async fn a_large_value_written_again_is_stored_once(backend: &dyn Backend) {
    // Each round sends the same 300 KB text to two tasks (Send arguments, kept in the frontier
    // of a checkpoint), which both append it: their results are saved as pending writes, then
    // merged into the state. Stored whole, every round would cost the text ~6 times over.
    const ROUNDS: usize = 5;
    let big = prose(300 * 1024);
    let saver = backend.saver();
    let mut g = StateGraph::<Log>::named("copies");
    g.add_node("plan", |_s: Arc<Log>, _c: Context| async {
        Ok::<_, NodeError>(entries(&["plan"]))
    });
    g.add_node("copy", |_s: Arc<Log>, c: Context| async move {
        Ok::<_, NodeError>(LogUpdate::default().steps(vec![c.arg::<String>()?]))
    });
    g.add_edge(START, "plan");
    let text = big.clone();
    g.add_conditional_edges(
        "plan",
        move |s: &Log| {
            if s.steps.len() >= 3 * ROUNDS {
                return Route::from(END);
            }
            vec![Send::new("copy", &text), Send::new("copy", &text)].into()
        },
        ["copy", END],
    );
    g.add_edge("copy", "plan");
    let graph = g.compile().unwrap().with_checkpointer(saver.clone());
    let config = RunConfig::new()
        .thread("copies")
        .durability(Durability::Sync);
    let out = graph.invoke(entries(&[]), config).await.unwrap();
    assert_eq!(
        out.state.steps.iter().filter(|s| **s == big).count(),
        2 * ROUNDS
    );

    let stored = backend.stored_bytes("copies") as usize;
    assert!(
        stored < 3 * big.len(),
        "{stored} bytes stored for {} copies of a {}-byte text",
        2 * ROUNDS,
        big.len()
    );
    // Every record reads back whole: the state, and each round's saved task results.
    assert_eq!(
        graph.get_state("copies", None).await.unwrap().values,
        out.state
    );
    let mut results = 0;
    for record in all_records(saver.as_ref(), "copies").await {
        for w in saver.get_writes("copies", record.id).await.unwrap() {
            if let PendingKind::Update { update, .. } = &w.kind {
                assert!(update.get().contains(&big[..1000]));
                results += 1;
            }
        }
    }
    assert_eq!(results, 2 * ROUNDS);
}
