//! Inspection and time travel: get_state, history, update_state, replay, fork, rerun, delete
//! and prune.

use crate::backends::Backend;
use crate::common::{checkpoint_ids, entries, linear, looping, strings, Log, Probe};
use stategraph::checkpoint::{CheckpointId, Source};
use stategraph::graph::{CompiledGraph, GraphError};
use stategraph::runtime::{HistoryQuery, Resume, RunConfig, RunError, SnapshotPolicy};

/// A finished `a -> b -> c` thread `t`.
async fn finished_abc(backend: &dyn Backend, probe: &Probe) -> CompiledGraph<Log> {
    let graph = linear(probe, &["a", "b", "c"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    graph
}

/// The checkpoint of thread `t` after which `node` was next.
async fn before_node(graph: &CompiledGraph<Log>, thread: &str, node: &str) -> CheckpointId {
    let history = graph
        .history(thread, HistoryQuery::default())
        .await
        .unwrap();
    history
        .iter()
        .find(|h| h.next == [node])
        .map(|h| h.checkpoint_id)
        .unwrap()
}

pub async fn get_state_reads_any_checkpoint(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;

    let latest = graph.get_state("t", None).await.unwrap();
    assert_eq!(latest.values.steps, strings(&["a", "b", "c"]));
    assert!(latest.next.is_empty() && latest.interrupts.is_empty() && latest.errors.is_empty());
    assert_eq!(latest.step, 3);

    let at = before_node(&graph, "t", "b").await;
    let old = graph.get_state("t", Some(at)).await.unwrap();
    assert_eq!(
        (old.values.steps.clone(), old.next.clone(), old.step),
        (strings(&["a"]), strings(&["b"]), 1)
    );
    assert_eq!(old.checkpoint_id, at);

    let err = graph.get_state("nobody", None).await.unwrap_err();
    assert!(matches!(err, RunError::ThreadNotFound { .. }), "{err:?}");
    let err = graph
        .get_state("t", Some(uuid::Uuid::now_v7()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::CheckpointNotFound { .. }),
        "{err:?}"
    );
}

pub async fn history_is_newest_first_filtered_and_paged(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;
    graph
        .update_state("t", entries(&["note"]), None)
        .await
        .unwrap();
    let all = graph.history("t", HistoryQuery::default()).await.unwrap();
    let steps: Vec<u64> = all.iter().map(|h| h.step).collect();
    assert_eq!(steps, vec![4, 3, 2, 1, 0]);

    // Pages of two, each starting before the last entry of the previous one.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = graph
            .history(
                "t",
                HistoryQuery {
                    limit: 2,
                    before,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        before = Some(last.checkpoint_id);
        paged.extend(page.into_iter().map(|h| h.checkpoint_id));
    }
    assert_eq!(
        paged,
        all.iter().map(|h| h.checkpoint_id).collect::<Vec<_>>()
    );

    let by_source = |source| HistoryQuery {
        source: Some(source),
        ..Default::default()
    };
    let updates = graph.history("t", by_source(Source::Update)).await.unwrap();
    assert_eq!(updates.iter().map(|h| h.step).collect::<Vec<_>>(), vec![4]);
    let loops = graph.history("t", by_source(Source::Loop)).await.unwrap();
    assert_eq!(
        loops.iter().map(|h| h.step).collect::<Vec<_>>(),
        vec![3, 2, 1]
    );

    let by_b = HistoryQuery {
        writer: Some("b".into()),
        ..Default::default()
    };
    let written_by_b = graph.history("t", by_b).await.unwrap();
    assert_eq!(written_by_b.len(), 1);
    assert_eq!(written_by_b[0].metadata.writers, strings(&["b"]));

    let err = graph
        .history("nobody", HistoryQuery::default())
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::ThreadNotFound { .. }), "{err:?}");
}

pub async fn update_state_with_and_without_as_node(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b", "c"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    graph
        .invoke(
            entries(&[]),
            RunConfig::new().thread("t").interrupt_before(["b"]),
        )
        .await
        .unwrap();

    // Without as_node: the edit stands for the node that wrote last (a), as in LangGraph, so
    // a's edges choose what runs next (b again); the breakpoint's pause is not carried over.
    let edited = graph
        .update_state("t", entries(&["edited"]), None)
        .await
        .unwrap();
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.checkpoint_id, edited);
    assert_eq!(state.values.steps, strings(&["a", "edited"]));
    assert_eq!(state.next, strings(&["b"]));
    assert!(state.interrupts.is_empty());
    assert_eq!(state.metadata.source, Source::Update);
    assert_eq!(state.metadata.writers, strings(&["a"]));

    // As b: the edit stands for b's output, so b's edges decide what runs next.
    graph
        .update_state("t", entries(&["b (by hand)"]), Some("b"))
        .await
        .unwrap();
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.next, strings(&["c"]));
    assert!(state.interrupts.is_empty());
    assert_eq!(state.metadata.writers, strings(&["b"]));

    let done = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        done.state.steps,
        strings(&["a", "edited", "b (by hand)", "c"])
    );
    assert_eq!(
        [probe.runs("a"), probe.runs("b"), probe.runs("c")],
        [1, 0, 1]
    );

    let err = graph
        .update_state("t", entries(&[]), Some("nope"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Graph(GraphError::UnknownNode { .. })),
        "{err:?}"
    );
}

pub async fn replay_from_a_checkpoint_starts_a_branch(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;
    let before = checkpoint_ids(&graph, "t").await;
    let mut old_states = Vec::new();
    for id in &before {
        old_states.push(graph.get_state("t", Some(*id)).await.unwrap().values);
    }

    // Replay from the checkpoint before b: b and c run again, a does not.
    let from = before_node(&graph, "t", "b").await;
    let replayed = graph
        .resume(
            "t",
            Resume::Continue,
            RunConfig::new().from_checkpoint(from),
        )
        .await
        .unwrap();
    assert_eq!(replayed.state.steps, strings(&["a", "b", "c"]));
    assert_eq!(
        [probe.runs("a"), probe.runs("b"), probe.runs("c")],
        [1, 2, 2]
    );

    // The new branch: a fork checkpoint on top of `from`, then the replayed steps.
    let history = graph.history("t", HistoryQuery::default()).await.unwrap();
    assert_eq!(history.len(), before.len() + 3);
    let fork = &history[2];
    assert_eq!(
        (fork.metadata.source, fork.parent_id, fork.step),
        (Source::Fork, Some(from), 1)
    );
    assert_eq!(history[1].parent_id, Some(fork.checkpoint_id));
    assert_eq!(history[0].parent_id, Some(history[1].checkpoint_id));

    // The old branch is untouched.
    for (id, values) in before.iter().zip(&old_states) {
        assert_eq!(
            &graph.get_state("t", Some(*id)).await.unwrap().values,
            values
        );
    }
    let err = graph
        .resume(
            "t",
            Resume::Continue,
            RunConfig::new().from_checkpoint(uuid::Uuid::now_v7()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::CheckpointNotFound { .. }),
        "{err:?}"
    );
}

pub async fn fork_leaves_the_source_thread_untouched(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;
    let before = graph.history("t", HistoryQuery::default()).await.unwrap();
    let from = before_node(&graph, "t", "b").await;

    let branch = graph.fork("t", from, Some("branch".into())).await.unwrap();
    assert_eq!(branch, "branch");
    let start = graph.get_state("branch", None).await.unwrap();
    assert_eq!(
        (start.values.steps.clone(), start.next.clone()),
        (strings(&["a"]), strings(&["b"]))
    );
    assert_eq!(start.metadata.source, Source::Fork);

    let done = graph
        .resume("branch", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["a", "b", "c"]));
    assert_eq!(
        [probe.runs("a"), probe.runs("b"), probe.runs("c")],
        [1, 2, 2]
    );

    let after = graph.history("t", HistoryQuery::default()).await.unwrap();
    let ids = |h: &[stategraph::runtime::HistoryEntry]| {
        h.iter().map(|e| e.checkpoint_id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&after),
        ids(&before),
        "the source thread's history is unchanged"
    );

    // Without a name the branch gets a fresh v7 id; an existing thread is never overwritten.
    let unnamed = graph.fork("t", from, None).await.unwrap();
    assert_eq!(
        uuid::Uuid::parse_str(&unnamed).unwrap().get_version_num(),
        7
    );
    let err = graph
        .fork("t", from, Some("branch".into()))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::InvalidInput(_)), "{err:?}");
}

pub async fn rerun_from_redoes_one_stage(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;

    let out = graph.rerun_from("t", "b", RunConfig::new()).await.unwrap();
    assert_eq!(
        out.state.steps,
        strings(&["a", "b", "c"]),
        "a's output is kept, b and c redone"
    );
    assert_eq!(
        [probe.runs("a"), probe.runs("b"), probe.runs("c")],
        [1, 2, 2]
    );

    let err = graph
        .rerun_from("t", "nope", RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Graph(GraphError::UnknownNode { .. })),
        "{err:?}"
    );
}

pub async fn delete_thread_removes_everything(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = finished_abc(backend, &probe).await;
    graph
        .invoke(entries(&[]), RunConfig::new().thread("other"))
        .await
        .unwrap();

    graph.delete_thread("t").await.unwrap();
    assert!(matches!(
        graph.get_state("t", None).await.unwrap_err(),
        RunError::ThreadNotFound { .. }
    ));
    assert!(matches!(
        graph
            .history("t", HistoryQuery::default())
            .await
            .unwrap_err(),
        RunError::ThreadNotFound { .. }
    ));
    let threads: Vec<String> = graph
        .threads()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    assert_eq!(threads, strings(&["other"]));

    // The id can be used again, for a thread that starts from nothing.
    let fresh = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(fresh.state.steps, strings(&["a", "b", "c"]));
    assert_eq!(checkpoint_ids(&graph, "t").await.len(), 4);
    assert!(matches!(
        graph.delete_thread("nobody").await.unwrap_err(),
        RunError::ThreadNotFound { .. }
    ));
}

pub async fn prune_keeps_the_newest_and_they_read_back_exactly(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = looping(&probe, 40)
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    // Short delta chains, so the kept checkpoints lean on pruned ones.
    let mut config = RunConfig::new().thread("t");
    config.snapshots = SnapshotPolicy {
        max_chain: 6,
        ratio: f64::INFINITY,
        min_ratio: 0.0,
    };
    graph.invoke(entries(&[]), config).await.unwrap();

    let ids = checkpoint_ids(&graph, "t").await;
    assert_eq!(ids.len(), 41);
    let mut states = Vec::new();
    for id in &ids {
        states.push(graph.get_state("t", Some(*id)).await.unwrap());
    }

    assert_eq!(graph.prune("t", 10).await.unwrap(), 31);
    assert_eq!(checkpoint_ids(&graph, "t").await, ids[..10].to_vec());
    for (id, before) in ids[..10].iter().zip(&states) {
        let after = graph.get_state("t", Some(*id)).await.unwrap();
        assert_eq!(
            after.values, before.values,
            "checkpoint {id} reads back exactly"
        );
        assert_eq!(
            (after.step, after.next.clone(), after.parent_id),
            (before.step, before.next.clone(), before.parent_id)
        );
    }
    for id in &ids[10..] {
        let err = graph.get_state("t", Some(*id)).await.unwrap_err();
        assert!(
            matches!(err, RunError::CheckpointNotFound { .. }),
            "{err:?}"
        );
    }
    assert_eq!(
        graph.prune("t", 10).await.unwrap(),
        0,
        "nothing more to prune"
    );

    // The thread goes on from its newest checkpoint as before.
    let more = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(more.state.steps.len(), 41);
}
