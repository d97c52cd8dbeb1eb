//! Integrity: a damaged record is reported with its thread and checkpoint named, never read as
//! an empty or default state, and the older good checkpoints stay usable.

use crate::backends::Backend;
use crate::common::{chat, checkpoint_ids, entries, linear, strings, Log, Probe};
use stategraph::checkpoint::codec::FrameError;
use stategraph::checkpoint::{CheckpointError, CheckpointId};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Resume, RunConfig, RunError};

/// Asserts `err` reports checkpoint `id` of thread `t` as corrupt, and returns what is wrong.
fn corrupt_at(err: RunError, id: CheckpointId) -> FrameError {
    let message = err.to_string();
    match err {
        RunError::Checkpoint(CheckpointError::Corrupt {
            thread,
            checkpoint,
            source,
            ..
        }) => {
            assert_eq!((thread.as_str(), checkpoint), ("t", Some(id)));
            assert!(
                message.contains("`t`") && message.contains(&id.to_string()),
                "{message}"
            );
            source
        }
        other => panic!("expected checkpoint {id} reported corrupt, got {other:?}"),
    }
}

/// A finished four-step thread `t`, and the state stored at each of its checkpoints.
async fn thread_with_history(
    backend: &dyn Backend,
    probe: &Probe,
) -> (CompiledGraph<Log>, Vec<(CheckpointId, Log)>) {
    let graph = linear(probe, &["a", "b", "c", "d"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let mut states = Vec::new();
    for id in checkpoint_ids(&graph, "t").await {
        states.push((id, graph.get_state("t", Some(id)).await.unwrap().values));
    }
    (graph, states)
}

pub async fn a_truncated_checkpoint_is_reported_with_its_thread_and_id(backend: &dyn Backend) {
    let probe = Probe::default();
    let (graph, states) = thread_with_history(backend, &probe).await;
    let (newest, _) = states[0].clone();
    backend.tamper("t", newest, &mut |bytes| bytes.truncate(bytes.len() / 2));

    let err = graph.get_state("t", None).await.unwrap_err();
    assert!(matches!(
        corrupt_at(err, newest),
        FrameError::Truncated { .. }
    ));

    // Nothing starts over from an empty state: resuming, or running new input, is refused.
    let err = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap_err();
    corrupt_at(err, newest);
    let err = graph
        .invoke(entries(&["more"]), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    corrupt_at(err, newest);
    assert_eq!(probe.runs("a"), 1, "no node ran again");

    // The older checkpoints still read back exactly, and are listed for the user to pick from.
    for (id, values) in &states[1..] {
        assert_eq!(
            &graph.get_state("t", Some(*id)).await.unwrap().values,
            values
        );
    }
    let listed: Vec<CheckpointId> = checkpoint_ids(&graph, "t").await;
    let good: Vec<CheckpointId> = states[1..].iter().map(|(id, _)| *id).collect();
    assert_eq!(listed, good, "history lists the readable checkpoints");

    // And the thread can be continued from the last good one, on a new thread.
    let (last_good, _) = states[1];
    let branch = graph
        .fork("t", last_good, Some("t-recovered".into()))
        .await
        .unwrap();
    let done = graph
        .resume(&branch, Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["a", "b", "c", "d"]));
}

pub async fn a_flipped_bit_is_caught_and_older_checkpoints_stay_usable(backend: &dyn Backend) {
    let probe = Probe::default();
    let (graph, states) = thread_with_history(backend, &probe).await;
    // states: newest first: steps 4, 3, 2, 1, 0. Damage the one at step 2.
    let (damaged, _) = states[2];
    backend.tamper("t", damaged, &mut |bytes| {
        let at = bytes.len() - 3;
        bytes[at] ^= 0x04;
    });

    let err = graph.get_state("t", Some(damaged)).await.unwrap_err();
    assert!(matches!(
        corrupt_at(err, damaged),
        FrameError::Checksum { .. }
    ));

    // A newer checkpoint either stands alone (a snapshot) and reads exactly, or is stored as
    // changes over the damaged one and then names *it*: never a partial or default state.
    for (id, values) in &states[..2] {
        match graph.get_state("t", Some(*id)).await {
            Ok(read) => assert_eq!(&read.values, values),
            Err(err) => {
                corrupt_at(err, damaged);
            }
        }
    }
    for (id, values) in &states[3..] {
        assert_eq!(
            &graph.get_state("t", Some(*id)).await.unwrap().values,
            values
        );
    }
}

pub async fn a_thread_stored_in_the_json_format_reads_and_resumes(backend: &dyn Backend) {
    use stategraph::checkpoint::codec;
    // A thread paused before `c`, as an older build stored it: every checkpoint rewritten as a
    // JSON (format 1) frame.
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b", "c", "d"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    graph
        .invoke(
            entries(&[]),
            RunConfig::new().thread("t").interrupt_before(["c"]),
        )
        .await
        .unwrap();
    let ids = checkpoint_ids(&graph, "t").await;
    let mut before = Vec::new();
    for id in &ids {
        before.push(graph.get_state("t", Some(*id)).await.unwrap().values);
        backend.tamper("t", *id, &mut |bytes| {
            assert_eq!(bytes[2], 4, "written in the compact format");
            let record = codec::decode_checkpoint("t", *id, bytes).unwrap();
            *bytes = codec::encode(&record).unwrap();
        });
    }
    for (id, state) in ids.iter().zip(&before) {
        assert_eq!(
            &graph.get_state("t", Some(*id)).await.unwrap().values,
            state
        );
    }

    // The run continues on top of the old records; only the nodes not yet run, run.
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.steps, strings(&["a", "b", "c", "d"]));
    assert_eq!(
        [
            probe.runs("a"),
            probe.runs("b"),
            probe.runs("c"),
            probe.runs("d")
        ],
        [1, 1, 1, 1]
    );
    let newest = checkpoint_ids(&graph, "t").await[0];
    assert!(!ids.contains(&newest));
    backend.tamper("t", newest, &mut |bytes| {
        assert_eq!(bytes[2], 4, "new checkpoints are compact")
    });
}

pub async fn a_damaged_piece_of_a_large_snapshot_is_reported_not_read(backend: &dyn Backend) {
    // 3000 messages (~300 KB): the thread's later snapshots are stored as shared pieces.
    let graph = chat(3000)
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("big"))
        .await
        .unwrap();
    backend.tamper_pieces("big", &mut |bytes| {
        let middle = bytes.len() / 2;
        if let Some(b) = bytes.get_mut(middle) {
            *b ^= 0x01;
        }
    });

    let check = |err: RunError| {
        let message = err.to_string();
        match err {
            RunError::Checkpoint(CheckpointError::Corrupt {
                thread,
                checkpoint: Some(_),
                source: FrameError::Decode(what),
                ..
            }) => {
                assert_eq!(thread, "big");
                assert!(what.contains("does not match its hash"), "{what}");
                assert!(message.contains("snapshot piece"), "{message}");
            }
            other => panic!("expected a damaged snapshot piece, got {other:?}"),
        }
    };
    check(graph.get_state("big", None).await.unwrap_err());
    // Nothing continues from a state it could not read.
    check(
        graph
            .invoke(entries(&["more"]), RunConfig::new().thread("big"))
            .await
            .unwrap_err(),
    );
}
