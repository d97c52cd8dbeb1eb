//! Two workers on one thread (LangGraph #8796: both ran, the chain forked). A worker whose lease
//! was taken over, because it was paused or cut off while the lease lapsed, can never add to the
//! thread: its writes are refused inside their own transaction.

use super::support::pg_cluster::cluster;
use super::{checkpoint, lease, worker, Log, LogUpdate};
use serde_json::json;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError};
use stategraph::{StateGraph, END, START};
use stategraph_checkpoint::{
    now_ms, CheckpointError, Checkpointer, Lease, PendingKind, PendingWrite,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{Notify, Semaphore};

fn assert_refused<T: std::fmt::Debug>(result: Result<T, CheckpointError>, holder: u32, what: &str) {
    match result {
        Err(CheckpointError::ThreadBusy { thread, pid, .. }) => {
            assert_eq!((thread.as_str(), pid), ("t", holder), "{what}");
        }
        other => panic!("{what}: expected the write refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_writer_whose_lease_was_taken_over_is_refused_and_the_chain_does_not_fork() {
    let db = cluster().database();
    let (a, b) = (worker(&db).await, worker(&db).await);

    // Worker A takes the thread and saves its first step.
    let held_by_a = lease("run-a");
    a.swap_lease("t", None, Some(&held_by_a))
        .await
        .unwrap()
        .unwrap();
    let first = checkpoint("t", None, json!({"steps": ["a"]}));
    a.put_checkpoint(&first, true).await.unwrap();

    // A stalls (SIGSTOP, a long pause); its lease lapses and worker B takes the thread over,
    // as B's run does when it finds the lease lapsed.
    let held_by_b = Lease {
        pid: 4242,
        ..lease("run-b")
    };
    b.swap_lease("t", Some(&held_by_a), Some(&held_by_b))
        .await
        .unwrap()
        .unwrap();

    // A wakes up and goes on: every write of the thread is refused, naming the new holder.
    let zombie = checkpoint("t", Some(first.id), json!({"steps": ["a", "zombie"]}));
    assert_refused(a.put_checkpoint(&zombie, true).await, 4242, "checkpoint");
    let write = PendingWrite {
        task: 0,
        node: "zombie".into(),
        kind: PendingKind::Error {
            message: "late".into(),
        },
    };
    assert_refused(
        a.put_writes("t", first.id, &[write], true).await,
        4242,
        "writes",
    );
    assert_refused(a.put_journal("t", "k", &json!(1)).await, 4242, "journal");
    let child = checkpoint("t/review:0a1b2c3d", None, json!({}));
    assert_refused(
        a.put_checkpoint(&child, false).await,
        4242,
        "a subgraph's checkpoint",
    );
    assert_refused(a.delete_checkpoints("t", &[first.id]).await, 4242, "prune");
    assert_refused(a.delete_thread("t").await, 4242, "delete");
    let renewed = Lease {
        expires_at_ms: now_ms() + 60_000,
        ..held_by_a.clone()
    };
    assert_eq!(
        a.swap_lease("t", Some(&held_by_a), Some(&renewed))
            .await
            .unwrap(),
        Err(Some(held_by_b.clone())),
        "A's renewal finds B's lease"
    );

    // B goes on from the first step: one chain, nothing of A's after the takeover.
    let next = checkpoint("t", Some(first.id), json!({"steps": ["a", "b"]}));
    b.put_checkpoint(&next, true).await.unwrap();
    let chain: Vec<_> = b.list_checkpoints("t", None, 10).await.unwrap();
    let ids: Vec<_> = chain.iter().map(|r| r.id).collect();
    assert_eq!(ids, [next.id, first.id]);
    assert!(b.get_writes("t", first.id).await.unwrap().is_empty());
    assert_eq!(b.get_journal("t", "k").await.unwrap(), None);
    assert!(b
        .get_checkpoint(&child.thread_id, None)
        .await
        .unwrap()
        .is_none());
    // A still reads the thread.
    assert_eq!(
        a.get_checkpoint("t", None).await.unwrap().unwrap().id,
        next.id
    );

    // B lets go. A lost the thread: its writes stay refused until it takes a lease again.
    b.swap_lease("t", Some(&held_by_b), None)
        .await
        .unwrap()
        .unwrap();
    assert_refused(a.put_checkpoint(&zombie, true).await, 0, "after B let go");
    a.swap_lease("t", None, Some(&lease("run-a2")))
        .await
        .unwrap()
        .unwrap();
    let resumed = checkpoint("t", Some(next.id), json!({"steps": ["a", "b", "a2"]}));
    a.put_checkpoint(&resumed, true).await.unwrap();

    // A handle that never took the lease writes unfenced, as every store lets it (a fork's
    // first records, a record between runs).
    let c = worker(&db).await;
    c.put_journal("t", "note", &json!("between runs"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_racing_a_takeover_commits_before_it_or_not_at_all() {
    let db = cluster().database();
    let (a, b) = (Arc::new(worker(&db).await), worker(&db).await);
    let held_by_a = lease("run-a");
    a.swap_lease("t", None, Some(&held_by_a))
        .await
        .unwrap()
        .unwrap();

    // A writes as fast as it can while B takes the thread over.
    let writer = tokio::spawn({
        let a = a.clone();
        async move {
            let (mut saved, mut refused, mut parent) = (Vec::new(), 0, None);
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while refused < 5 {
                assert!(
                    std::time::Instant::now() < give_up,
                    "A's writes were never refused after the takeover"
                );
                let record = checkpoint("t", parent, json!({"n": saved.len()}));
                match a.put_checkpoint(&record, false).await {
                    Ok(()) => {
                        parent = Some(record.id);
                        saved.push(record.id);
                    }
                    Err(CheckpointError::ThreadBusy { .. }) => refused += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            saved
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    b.swap_lease("t", Some(&held_by_a), Some(&lease("run-b")))
        .await
        .unwrap()
        .unwrap();
    // What B sees right after the takeover is all A ever saved: a write acknowledged to A
    // committed before the takeover did.
    let seen: Vec<_> = b
        .list_checkpoints("t", None, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .rev()
        .collect();
    let saved = writer.await.unwrap();
    assert!(!saved.is_empty(), "A wrote before the takeover");
    assert_eq!(seen, saved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_thread_was_taken_over_cannot_add_a_step() {
    let db = cluster().database();
    let (a, b) = (worker(&db).await, worker(&db).await);
    // `slow` holds worker A's run until the test opens the gate; worker B's passes.
    let (started, gate, first_call) = (
        Arc::new(Notify::new()),
        Arc::new(Semaphore::new(0)),
        Arc::new(AtomicBool::new(true)),
    );
    let graph_on = |store: Arc<dyn Checkpointer>| {
        let (started, gate, first_call) = (started.clone(), gate.clone(), first_call.clone());
        let mut g = StateGraph::<Log>::new();
        g.add_node("slow", move |_s: Arc<Log>, _c: Context| {
            let (started, gate, first_call) = (started.clone(), gate.clone(), first_call.clone());
            async move {
                if first_call.swap(false, Ordering::SeqCst) {
                    started.notify_one();
                    let _open = gate
                        .acquire()
                        .await
                        .map_err(|e| NodeError::new(e.to_string()))?;
                }
                Ok::<_, NodeError>(LogUpdate::default().steps(vec!["slow".to_string()]))
            }
        });
        g.add_node("next", |_s: Arc<Log>, _c: Context| async {
            Ok::<_, NodeError>(LogUpdate::default().steps(vec!["next".to_string()]))
        });
        g.add_edge(START, "slow")
            .add_edge("slow", "next")
            .add_edge("next", END);
        g.compile().unwrap().with_checkpointer(store)
    };
    let (on_a, on_b) = (graph_on(Arc::new(a)), graph_on(Arc::new(b)));

    let run_a = tokio::spawn({
        let on_a = on_a.clone();
        async move {
            on_a.invoke(LogUpdate::default(), RunConfig::new().thread("job"))
                .await
        }
    });
    started.notified().await;

    // A's worker freezes mid-step until its lease lapses (time passing, done here by hand),
    // and worker B resumes the thread from its last checkpoint, to the end.
    let store_b = on_b.checkpointer().unwrap().clone();
    let held = store_b.get_lease("job").await.unwrap().unwrap();
    let lapsed = Lease {
        expires_at_ms: now_ms().saturating_sub(1),
        ..held.clone()
    };
    store_b
        .swap_lease("job", Some(&held), Some(&lapsed))
        .await
        .unwrap()
        .unwrap();
    let done = on_b
        .resume("job", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.steps, ["slow", "next"]);

    // A thaws and finishes its step: the step is refused, and A's run fails saying so.
    gate.add_permits(1);
    match run_a.await.unwrap() {
        Err(RunError::Checkpoint(CheckpointError::ThreadBusy { thread, .. })) => {
            assert_eq!(thread, "job")
        }
        other => panic!("A's run should have been refused, got {other:?}"),
    }

    // The history is one chain, B's: every checkpoint continues the one before it.
    let mut chain = store_b
        .list_checkpoints("job", None, usize::MAX)
        .await
        .unwrap();
    chain.reverse();
    for pair in chain.windows(2) {
        assert_eq!(pair[1].parent_id, Some(pair[0].id), "a fork in the chain");
    }
    let state = on_b.get_state("job", None).await.unwrap();
    assert_eq!(state.values.steps, ["slow", "next"]);
}
