//! Every run belongs to a thread: a UUID v7 by default, or the id the caller gives.

use crate::backends::Backend;
use crate::common::{entries, linear, strings, Probe};
use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::{RunConfig, RunError};

pub async fn a_new_thread_gets_a_uuid_v7(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());

    let first = graph.invoke(entries(&[]), RunConfig::new()).await.unwrap();
    let second = graph.invoke(entries(&[]), RunConfig::new()).await.unwrap();

    let first_id = uuid::Uuid::parse_str(&first.thread_id).unwrap();
    let second_id = uuid::Uuid::parse_str(&second.thread_id).unwrap();
    assert_eq!(first_id.get_version_num(), 7);
    assert_eq!(second_id.get_version_num(), 7);
    assert!(first_id < second_id, "v7 ids sort in creation order");

    // Each run is its own thread, stored under that id.
    let mut threads: Vec<String> = graph
        .threads()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_id)
        .collect();
    threads.sort();
    assert_eq!(
        threads,
        vec![first.thread_id.clone(), second.thread_id.clone()]
    );
    assert_eq!(
        graph
            .get_state(&first.thread_id, None)
            .await
            .unwrap()
            .values
            .steps,
        strings(&["a"])
    );
}

pub async fn a_given_thread_id_is_kept(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());

    let out = graph
        .invoke(entries(&["hello"]), RunConfig::new().thread("review-42"))
        .await
        .unwrap();
    assert_eq!(out.thread_id, "review-42");

    // A second run on the same thread continues its state.
    let again = graph
        .invoke(entries(&["again"]), RunConfig::new().thread("review-42"))
        .await
        .unwrap();
    assert_eq!(again.state.steps, strings(&["hello", "a", "again", "a"]));
    assert_eq!(
        graph.get_state("review-42", None).await.unwrap().values,
        again.state
    );
}

pub async fn an_invalid_thread_id_is_refused(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());

    for bad in [
        String::new(),
        "a/b".into(),
        "a\\b".into(),
        "line\nbreak".into(),
        "x".repeat(201),
    ] {
        let err = graph
            .invoke(entries(&[]), RunConfig::new().thread(bad.clone()))
            .await
            .unwrap_err();
        match err {
            RunError::Checkpoint(CheckpointError::InvalidThreadId { thread, .. }) => {
                assert_eq!(thread, bad)
            }
            other => panic!("expected InvalidThreadId for {bad:?}, got {other:?}"),
        }
        let err = graph.get_state(&bad, None).await.unwrap_err();
        assert!(
            matches!(
                err,
                RunError::Checkpoint(CheckpointError::InvalidThreadId { .. })
            ),
            "{err:?}"
        );
    }
    assert_eq!(probe.runs("a"), 0, "no node ran");
    assert!(
        graph.threads().await.unwrap().is_empty(),
        "nothing was stored"
    );
}
