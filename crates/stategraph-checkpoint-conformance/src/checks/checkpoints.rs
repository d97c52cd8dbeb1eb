//! What a checkpoint holds: a time-ordered id, its parent, the step, the state, the next tasks
//! (saved only once the frontier has advanced), and metadata (source, writers, time, schema
//! version, run id).

use crate::backends::Backend;
use crate::common::{entries, linear, strings, Log, LogUpdate, Probe};
use stategraph::checkpoint::Source;
use stategraph::runtime::{Context, HistoryQuery, NodeError, Resume, RunConfig};
use stategraph::{StateGraph, END, START};
use std::sync::{Arc, Mutex};

pub async fn checkpoints_record_ids_parents_steps_and_metadata(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b", "c"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();

    let history = graph.history("t", HistoryQuery::default()).await.unwrap();
    // One checkpoint for the input, then one per superstep; newest first.
    let steps: Vec<u64> = history.iter().map(|h| h.step).collect();
    assert_eq!(steps, vec![3, 2, 1, 0]);
    assert_eq!(out.checkpoint_id, Some(history[0].checkpoint_id));

    for (newer, older) in history.iter().zip(&history[1..]) {
        assert!(
            newer.checkpoint_id > older.checkpoint_id,
            "ids are time-ordered"
        );
        assert_eq!(
            newer.parent_id,
            Some(older.checkpoint_id),
            "each checkpoint names its parent"
        );
        assert!(newer.metadata.created_at_ms >= older.metadata.created_at_ms);
    }
    assert_eq!(
        history[3].parent_id, None,
        "the first checkpoint has no parent"
    );
    for h in &history {
        assert_eq!(h.checkpoint_id.get_version_num(), 7);
        assert_eq!(h.metadata.schema_version, 1);
        assert_eq!(h.metadata.run_id, out.run_id);
        assert_eq!(h.metadata.graph.as_deref(), Some("linear"));
    }

    let sources: Vec<Source> = history.iter().map(|h| h.metadata.source).collect();
    assert_eq!(
        sources,
        vec![Source::Loop, Source::Loop, Source::Loop, Source::Input]
    );
    let writers: Vec<Vec<String>> = history.iter().map(|h| h.metadata.writers.clone()).collect();
    assert_eq!(
        writers,
        vec![
            strings(&["c"]),
            strings(&["b"]),
            strings(&["a"]),
            strings(&["__input__"])
        ]
    );
    // Each checkpoint names the tasks that run *after* it.
    let next: Vec<Vec<String>> = history.iter().map(|h| h.next.clone()).collect();
    assert_eq!(
        next,
        vec![
            strings(&[]),
            strings(&["c"]),
            strings(&["b"]),
            strings(&["a"])
        ]
    );

    // And holds the state as of its step.
    let at_b = graph
        .get_state("t", Some(history[1].checkpoint_id))
        .await
        .unwrap();
    assert_eq!(at_b.values.steps, strings(&["a", "b"]));
    assert_eq!(at_b.step, 2);
}

/// What a node sees in the store while it runs.
#[derive(Debug, PartialEq)]
struct Seen {
    step: u64,
    next: Vec<String>,
    writers: Vec<String>,
}

pub async fn the_frontier_is_saved_only_after_it_advances(backend: &dyn Backend) {
    let probe = Probe::default();
    let saver = backend.saver();
    let seen = Arc::new(Mutex::new(Vec::new()));

    // `b` looks at the newest stored checkpoint while it runs: the step before it must already
    // be saved, naming `b` as what runs next (not `a` again, which is the bug that re-runs nodes).
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", probe.appender("a"));
    let (store, log) = (saver.clone(), seen.clone());
    g.add_node("b", move |_s: Arc<Log>, _ctx: Context| {
        let (store, log) = (store.clone(), log.clone());
        async move {
            let latest = store.get_checkpoint("t", None).await.unwrap().unwrap();
            log.lock().unwrap().push(Seen {
                step: latest.step,
                next: latest.frontier.next_nodes(),
                writers: latest.metadata.writers.clone(),
            });
            Ok::<_, NodeError>(LogUpdate::default().steps(vec!["b".to_string()]))
        }
    });
    g.add_node("c", probe.appender("c"));
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END);
    let graph = g.compile().unwrap().with_checkpointer(saver.clone());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();

    assert_eq!(
        *seen.lock().unwrap(),
        vec![Seen {
            step: 1,
            next: strings(&["b"]),
            writers: strings(&["a"]),
        }]
    );
    let done = graph.get_state("t", None).await.unwrap();
    assert!(
        done.next.is_empty(),
        "the last checkpoint has nothing left to run"
    );
    assert_eq!(done.values.steps, strings(&["a", "b", "c"]));
}

pub async fn each_run_stamps_its_own_run_id(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());

    let first = graph
        .invoke(
            entries(&[]),
            RunConfig::new().thread("t").interrupt_before(["b"]),
        )
        .await
        .unwrap();
    assert!(first.is_interrupted());
    let second = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_ne!(first.run_id, second.run_id);

    let history = graph.history("t", HistoryQuery::default()).await.unwrap();
    let run_ids: Vec<&str> = history.iter().map(|h| h.metadata.run_id.as_str()).collect();
    assert_eq!(
        run_ids,
        vec![
            second.run_id.as_str(),
            first.run_id.as_str(),
            first.run_id.as_str()
        ]
    );
}
