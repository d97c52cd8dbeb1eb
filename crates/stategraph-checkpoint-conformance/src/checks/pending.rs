//! Pending writes: when one task of a parallel superstep fails, the results of its siblings are
//! saved, and a resume runs only the failed task.

use crate::backends::Backend;
use crate::common::{entries, fan_out, strings, Probe};
use crate::faulty_store::{FaultyStore, Op};
use stategraph::runtime::{Resume, RunConfig, RunError, ThreadStatus};
use std::collections::BTreeMap;
use std::sync::Arc;

pub async fn a_failed_parallel_task_keeps_its_siblings_results(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = fan_out(&probe)
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    probe.break_node("w1");

    let err = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    match &err {
        RunError::NodeFailed {
            node,
            step,
            thread_id,
            ..
        } => {
            assert_eq!((node.as_str(), *step, thread_id.as_str()), ("w1", 2, "t"));
        }
        other => panic!("expected w1 to fail, got {other:?}"),
    }

    // The thread stands before the workers' step, with w0 and w2 done and w1's error kept.
    // As in LangGraph (test_pregel.py::test_pending_writes_resume), its newest state shows the
    // finished siblings' results merged and only the failed task next; the checkpoint itself,
    // read by id, is unchanged.
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.values.steps, strings(&["split", "w0", "w2"]));
    assert_eq!(state.next, strings(&["w1"]));
    assert_eq!(state.completed, strings(&["w0", "w2"]));
    let stored = graph
        .get_state("t", Some(state.checkpoint_id))
        .await
        .unwrap();
    assert_eq!(stored.values.steps, strings(&["split"]));
    assert_eq!(stored.next, strings(&["w0", "w1", "w2"]));
    assert_eq!(state.errors.len(), 1);
    assert_eq!(
        (state.errors[0].node.as_str(), state.errors[0].task),
        ("w1", 1)
    );
    assert_eq!(state.errors[0].message, "w1 is broken (run 1)");
    let summary = graph.threads().await.unwrap();
    assert_eq!(summary[0].status, ThreadStatus::Failed);

    // Failing again on resume: the siblings still do not run; the error shown is the latest.
    let again = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap_err();
    assert!(matches!(again, RunError::NodeFailed { .. }), "{again:?}");
    let state = graph.get_state("t", None).await.unwrap();
    let errors: Vec<&str> = state.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(errors, vec!["w1 is broken (run 2)"]);

    // Once w1 works, a resume runs w1 alone, then the join.
    probe.heal("w1");
    let done = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    let expected: BTreeMap<String, usize> =
        [("split", 1), ("w0", 1), ("w1", 3), ("w2", 1), ("join", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    assert_eq!(probe.all_runs(), expected);
    // Results merge in task order, however the runs were split.
    assert_eq!(
        done.state.steps,
        strings(&["split", "w0", "w1", "w2", "join"])
    );
    let state = graph.get_state("t", None).await.unwrap();
    assert!(state.errors.is_empty() && state.next.is_empty());
}

pub async fn task_results_are_saved_before_the_checkpoint_that_supersedes_them(
    backend: &dyn Backend,
) {
    let probe = Probe::default();
    let recorder = Arc::new(FaultyStore::over(backend.saver()));
    let graph = fan_out(&probe)
        .compile()
        .unwrap()
        .with_checkpointer(recorder.clone());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();

    let ops = recorder.take();
    // Every write saved against a checkpoint comes before the checkpoint that follows it.
    let mut writes_seen = 0;
    for (at, op) in ops.iter().enumerate() {
        if let Op::PutWrites {
            checkpoint, kinds, ..
        } = op
        {
            writes_seen += kinds.len();
            let superseded_at = ops.iter().position(
                |o| matches!(o, Op::PutCheckpoint { parent: Some(p), .. } if p == checkpoint),
            );
            assert!(
                superseded_at.is_some_and(|s| s > at),
                "writes against {checkpoint} after its successor: {ops:#?}"
            );
        }
    }
    // The workers' step had three tasks, each saved as it finished (those that finish
    // together in one write).
    assert_eq!(writes_seen, 3, "{ops:#?}");
}
