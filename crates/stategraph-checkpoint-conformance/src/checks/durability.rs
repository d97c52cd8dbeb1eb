//! Durability modes: what a run writes, when it asks the store to make it durable, and what is
//! on the store once the run ends, pauses or fails.
//!
//! "Flushed" below means the store was asked to make the record durable (`flush = true` or a
//! `flush()` call): for sled, that is an fsync. What each mode can lose to `kill -9`:
//! - sync: at most the step in flight (every checkpoint is flushed before the next step).
//! - async: the checkpoints not yet flushed (flushed at the end, on an interrupt, on an error).
//! - exit: everything since the run began (one checkpoint is written when the run stops).

use crate::backends::Backend;
use crate::common::{checkpoint_ids, entries, linear, strings, Log, Probe};
use crate::faulty_store::{FaultyStore, Op};
use stategraph::checkpoint::Source;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Durability, Resume, RunConfig, RunError};
use std::sync::Arc;

/// The checkpoint writes in the log: (step, flushed).
fn puts(ops: &[Op]) -> Vec<(u64, bool)> {
    ops.iter()
        .filter_map(|op| match op {
            Op::PutCheckpoint { step, flush, .. } => Some((*step, *flush)),
            _ => None,
        })
        .collect()
}

/// True when a `flush()` follows the last checkpoint write.
fn flushed_after_last_put(ops: &[Op]) -> bool {
    let last_put = ops
        .iter()
        .rposition(|op| matches!(op, Op::PutCheckpoint { .. }));
    let last_flush = ops.iter().rposition(|op| *op == Op::Flush);
    matches!((last_put, last_flush), (Some(p), Some(f)) if f > p)
}

/// The pending writes in the log: (kinds, flushed).
fn writes(ops: &[Op]) -> Vec<(Vec<&'static str>, bool)> {
    ops.iter()
        .filter_map(|op| match op {
            Op::PutWrites { kinds, flush, .. } => Some((kinds.clone(), *flush)),
            _ => None,
        })
        .collect()
}

struct Scenario {
    probe: Probe,
    recorder: Arc<FaultyStore>,
    graph: CompiledGraph<Log>,
}

fn scenario(backend: &dyn Backend) -> Scenario {
    let probe = Probe::default();
    let recorder = Arc::new(FaultyStore::over(backend.saver()));
    let graph = linear(&probe, &["a", "b", "c"])
        .compile()
        .unwrap()
        .with_checkpointer(recorder.clone());
    Scenario {
        probe,
        recorder,
        graph,
    }
}

fn config(thread: &str, mode: Durability) -> RunConfig {
    RunConfig::new().thread(thread).durability(mode)
}

/// Finishes a paused or failed thread and checks nothing that was saved ran twice.
async fn finish(s: &Scenario, thread: &str, mode: Durability, expected_runs: [usize; 3]) {
    let done = s
        .graph
        .resume(thread, Resume::Continue, config(thread, mode))
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["a", "b", "c"]));
    let runs = [s.probe.runs("a"), s.probe.runs("b"), s.probe.runs("c")];
    assert_eq!(runs, expected_runs, "runs of a, b, c on {thread}");
    s.recorder.take();
}

pub async fn sync_flushes_every_step(backend: &dyn Backend) {
    let s = scenario(backend);
    let mode = Durability::Sync;

    // Done: the input and every step, each flushed as it is written.
    s.graph
        .invoke(entries(&[]), config("done", mode))
        .await
        .unwrap();
    assert_eq!(
        puts(&s.recorder.take()),
        vec![(0, true), (1, true), (2, true), (3, true)]
    );
    assert_eq!(checkpoint_ids(&s.graph, "done").await.len(), 4);

    // Paused before c: the steps so far, flushed, and the pause itself, flushed.
    let paused = s
        .graph
        .invoke(entries(&[]), config("paused", mode).interrupt_before(["c"]))
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(0, true), (1, true), (2, true)]);
    assert_eq!(writes(&ops), vec![(vec!["interrupt"], true)]);
    let state = s.graph.get_state("paused", None).await.unwrap();
    assert_eq!(
        (state.step, state.next.clone(), state.interrupts.len()),
        (2, strings(&["c"]), 1)
    );
    finish(&s, "paused", mode, [2, 2, 2]).await;

    // Failed in b: the step before it and the error, all flushed.
    s.probe.break_node("b");
    let err = s
        .graph
        .invoke(entries(&[]), config("failed", mode))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::NodeFailed { .. }), "{err:?}");
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(0, true), (1, true)]);
    assert_eq!(writes(&ops), vec![(vec!["error"], true)]);
    s.probe.heal("b");
    finish(&s, "failed", mode, [3, 4, 3]).await;
}

pub async fn async_flushes_at_the_end_on_interrupt_and_on_error(backend: &dyn Backend) {
    let s = scenario(backend);
    let mode = Durability::Async;

    // Done: every checkpoint written (in the background), then one flush before returning.
    s.graph
        .invoke(entries(&[]), config("done", mode))
        .await
        .unwrap();
    let ops = s.recorder.take();
    assert_eq!(
        puts(&ops),
        vec![(0, false), (1, false), (2, false), (3, false)]
    );
    assert!(flushed_after_last_put(&ops), "{ops:#?}");
    assert_eq!(checkpoint_ids(&s.graph, "done").await.len(), 4);

    // Paused: the steps so far and the pause, flushed before the run returns.
    let paused = s
        .graph
        .invoke(entries(&[]), config("paused", mode).interrupt_before(["c"]))
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(0, false), (1, false), (2, false)]);
    assert_eq!(writes(&ops), vec![(vec!["interrupt"], true)]);
    assert!(flushed_after_last_put(&ops), "{ops:#?}");
    let state = s.graph.get_state("paused", None).await.unwrap();
    assert_eq!(
        (state.step, state.next.clone(), state.interrupts.len()),
        (2, strings(&["c"]), 1)
    );
    finish(&s, "paused", mode, [2, 2, 2]).await;

    // Failed: likewise.
    s.probe.break_node("b");
    s.graph
        .invoke(entries(&[]), config("failed", mode))
        .await
        .unwrap_err();
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(0, false), (1, false)]);
    assert_eq!(writes(&ops), vec![(vec!["error"], true)]);
    assert!(flushed_after_last_put(&ops), "{ops:#?}");
    s.probe.heal("b");
    finish(&s, "failed", mode, [3, 4, 3]).await;
}

pub async fn exit_writes_once_when_the_run_stops(backend: &dyn Backend) {
    let s = scenario(backend);
    let mode = Durability::Exit;

    // Done: one checkpoint, the final state, flushed.
    let out = s
        .graph
        .invoke(entries(&[]), config("done", mode))
        .await
        .unwrap();
    assert_eq!(puts(&s.recorder.take()), vec![(3, true)]);
    let history = s.graph.history("done", Default::default()).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].step, history[0].parent_id, history[0].snapshot),
        (3, None, true)
    );
    assert_eq!(history[0].metadata.source, Source::Loop);
    assert_eq!(Some(history[0].checkpoint_id), out.checkpoint_id);
    assert_eq!(
        s.graph.get_state("done", None).await.unwrap().values.steps,
        strings(&["a", "b", "c"])
    );

    // Paused: the pause and the one checkpoint it belongs to; resuming continues from there.
    s.graph
        .invoke(entries(&[]), config("paused", mode).interrupt_before(["c"]))
        .await
        .unwrap();
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(2, true)]);
    assert_eq!(writes(&ops), vec![(vec!["interrupt"], true)]);
    let state = s.graph.get_state("paused", None).await.unwrap();
    assert_eq!(
        (state.step, state.next.clone(), state.interrupts.len()),
        (2, strings(&["c"]), 1)
    );
    assert_eq!(state.values.steps, strings(&["a", "b"]));
    finish(&s, "paused", mode, [2, 2, 2]).await;
    // The resume wrote one more checkpoint, on top of the paused one.
    let history = s.graph.history("paused", Default::default()).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].parent_id, Some(history[1].checkpoint_id));

    // Failed: the error and the state before the failed step.
    s.probe.break_node("b");
    s.graph
        .invoke(entries(&[]), config("failed", mode))
        .await
        .unwrap_err();
    let ops = s.recorder.take();
    assert_eq!(puts(&ops), vec![(1, true)]);
    assert_eq!(writes(&ops), vec![(vec!["error"], true)]);
    let state = s.graph.get_state("failed", None).await.unwrap();
    assert_eq!(
        (state.step, state.next.clone(), state.errors.len()),
        (1, strings(&["b"]), 1)
    );
    s.probe.heal("b");
    finish(&s, "failed", mode, [3, 4, 3]).await;
}

/// `before -> child (a -> b) -> after` over a recording store.
fn with_a_child(backend: &dyn Backend) -> Scenario {
    let probe = Probe::default();
    let recorder = Arc::new(FaultyStore::over(backend.saver()));
    let child = crate::checks::subgraphs::chain(&probe, &["a", "b"])
        .compile()
        .unwrap();
    let graph = crate::checks::subgraphs::parent_of(&probe, child)
        .compile()
        .unwrap()
        .with_checkpointer(recorder.clone());
    Scenario {
        probe,
        recorder,
        graph,
    }
}

/// Sync mode with a child: a fresh child's input record is the one write not flushed on its
/// own, and a flushed write follows it (records survive in call order), so nesting adds no
/// flush beyond the child's steps; every other record is flushed as it is written.
pub async fn a_childs_input_rides_on_the_next_flush(backend: &dyn Backend) {
    let Scenario {
        probe,
        recorder,
        graph,
    } = with_a_child(backend);
    graph
        .invoke(entries(&[]), config("t", Durability::Sync))
        .await
        .unwrap();
    let ops = recorder.take();
    // (in a child's namespace, step, flushed)
    let puts: Vec<(bool, u64, bool)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::PutCheckpoint {
                thread,
                step,
                flush,
                ..
            } => Some((
                !stategraph::checkpoint::is_root_thread(thread),
                *step,
                *flush,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        puts,
        vec![
            (false, 0, true),
            (false, 1, true),
            (true, 0, false),
            (true, 1, true),
            (true, 2, true),
            (false, 2, true),
            (false, 3, true),
        ],
        "root input, before, the child's input (unflushed) and steps a, b, child, after"
    );
    let unflushed = ops
        .iter()
        .position(|op| matches!(op, Op::PutCheckpoint { flush: false, .. }))
        .unwrap();
    assert!(
        matches!(
            ops.get(unflushed + 1),
            Some(Op::PutCheckpoint { flush: true, .. })
        ),
        "the child's input is carried by the next write's flush: {ops:?}"
    );
    assert_eq!(probe.runs("a"), 1);
}

/// Async mode with a child: the child's checkpoints are written in the background like its
/// parent's, and the run flushes once, at its end, not once more at the child's.
pub async fn async_flushes_once_with_a_child(backend: &dyn Backend) {
    let Scenario {
        recorder, graph, ..
    } = with_a_child(backend);
    graph
        .invoke(entries(&[]), config("t", Durability::Async))
        .await
        .unwrap();
    let ops = recorder.take();
    assert_eq!(puts(&ops).len(), 7, "{ops:#?}");
    assert!(puts(&ops).iter().all(|(_, flushed)| !flushed), "{ops:#?}");
    let flushes = ops.iter().filter(|op| **op == Op::Flush).count();
    assert_eq!(flushes, 1, "{ops:#?}");
    assert!(flushed_after_last_put(&ops), "{ops:#?}");
    assert_eq!(checkpoint_ids(&graph, "t").await.len(), 4);
}
