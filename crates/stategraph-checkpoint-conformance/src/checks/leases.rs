//! One writer per thread: while a run holds a thread, every other run or edit of it fails at
//! once with "thread is busy"; a lease whose holder died, or that lapsed, is taken over.

use crate::backends::Backend;
use crate::common::{entries, linear, strings, Log, LogUpdate, Probe};
use stategraph::checkpoint::{now_ms, CheckpointError, Lease};
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError, ThreadStatus};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;
use tokio::sync::{Notify, Semaphore};

fn assert_busy(err: RunError, what: &str) {
    match err {
        RunError::Checkpoint(CheckpointError::ThreadBusy { thread, pid, .. }) => {
            assert_eq!(thread, "busy", "{what}");
            assert_eq!(
                pid,
                std::process::id(),
                "{what}: the holder is this process"
            );
        }
        other => panic!("{what}: expected ThreadBusy, got {other:?}"),
    }
}

pub async fn a_second_run_of_a_busy_thread_fails_at_once(backend: &dyn Backend) {
    // `slow` signals that it started, then waits for a permit the test hands out at the end.
    let started = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let mut g = StateGraph::<Log>::new();
    let (signal, permit) = (started.clone(), gate.clone());
    g.add_node("slow", move |_s: Arc<Log>, _c: Context| {
        let (signal, permit) = (signal.clone(), permit.clone());
        async move {
            signal.notify_one();
            let _held = permit
                .acquire()
                .await
                .map_err(|e| NodeError::new(e.to_string()))?;
            Ok::<_, NodeError>(LogUpdate::default().steps(vec!["slow".to_string()]))
        }
    });
    g.add_edge(START, "slow").add_edge("slow", END);
    let graph = g.compile().unwrap().with_checkpointer(backend.saver());

    let first = tokio::spawn({
        let graph = graph.clone();
        async move {
            graph
                .invoke(entries(&[]), RunConfig::new().thread("busy"))
                .await
        }
    });
    started.notified().await;

    // Each of these returns while the first run is still blocked: none of them waits for it.
    assert_busy(
        graph
            .invoke(entries(&[]), RunConfig::new().thread("busy"))
            .await
            .unwrap_err(),
        "invoke",
    );
    assert_busy(
        graph
            .resume("busy", Resume::Continue, RunConfig::new())
            .await
            .unwrap_err(),
        "resume",
    );
    assert_busy(
        graph
            .update_state("busy", entries(&["edit"]), None)
            .await
            .unwrap_err(),
        "update_state",
    );
    assert_busy(
        graph.delete_thread("busy").await.unwrap_err(),
        "delete_thread",
    );
    assert_busy(graph.prune("busy", 1).await.unwrap_err(), "prune");
    let summary = graph.threads().await.unwrap();
    assert_eq!(summary[0].status, ThreadStatus::Running);
    assert!(!first.is_finished());

    gate.add_permits(1);
    let done = first.await.unwrap().unwrap();
    assert_eq!(
        done.state.steps,
        strings(&["slow"]),
        "the refused calls changed nothing"
    );

    // Once the run is over the thread is free again.
    graph
        .update_state("busy", entries(&["edit"]), None)
        .await
        .unwrap();
    assert_eq!(graph.threads().await.unwrap()[0].status, ThreadStatus::Done);
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

pub async fn a_dead_or_lapsed_lease_is_taken_over(backend: &dyn Backend) {
    let probe = Probe::default();
    let store = backend.saver();
    let graph = linear(&probe, &["a", "b"])
        .compile()
        .unwrap()
        .with_checkpointer(store.clone());
    let paused = |thread: &'static str| {
        let graph = graph.clone();
        async move {
            let out = graph
                .invoke(
                    entries(&[]),
                    RunConfig::new().thread(thread).interrupt_before(["b"]),
                )
                .await
                .unwrap();
            assert!(out.is_interrupted());
        }
    };
    let plant = |thread: &'static str, lease: Lease| {
        let store = store.clone();
        async move {
            let current = store.get_lease(thread).await.unwrap();
            store
                .swap_lease(thread, current.as_ref(), Some(&lease))
                .await
                .unwrap()
                .unwrap();
        }
    };
    let in_a_minute = now_ms() + 60_000;

    // A run on this host whose process is gone (a crash, kill -9): its lease is void at once.
    paused("dead").await;
    let lease = Lease {
        owner: "crashed-run".into(),
        pid: dead_pid(),
        host: host_name(),
        expires_at_ms: in_a_minute,
    };
    plant("dead", lease).await;
    let done = graph
        .resume("dead", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["a", "b"]));

    // A run on another host cannot be checked: its lease binds until it lapses...
    paused("remote").await;
    let remote = Lease {
        owner: "remote-run".into(),
        pid: 4242,
        host: "another-host".into(),
        expires_at_ms: in_a_minute,
    };
    plant("remote", remote.clone()).await;
    let err = graph
        .resume("remote", Resume::Continue, RunConfig::new())
        .await
        .unwrap_err();
    match err {
        RunError::Checkpoint(CheckpointError::ThreadBusy {
            thread,
            pid,
            host,
            expires_in_ms,
        }) => {
            assert_eq!(
                (thread.as_str(), pid, host.as_str()),
                ("remote", 4242, "another-host")
            );
            assert!(expires_in_ms > 0 && expires_in_ms <= 60_000);
        }
        other => panic!("expected ThreadBusy, got {other:?}"),
    }
    assert_eq!(probe.runs("b"), 1, "only the 'dead' thread ran b");

    // ...and once it has lapsed, it is taken over.
    let lapsed = Lease {
        expires_at_ms: now_ms().saturating_sub(1),
        ..remote.clone()
    };
    let store2 = store.clone();
    store2
        .swap_lease("remote", Some(&remote), Some(&lapsed))
        .await
        .unwrap()
        .unwrap();
    let done = graph
        .resume("remote", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["a", "b"]));
    assert_eq!(
        store.get_lease("remote").await.unwrap(),
        None,
        "a finished run gives its lease back"
    );
}

pub async fn a_long_run_keeps_renewing_its_lease(backend: &dyn Backend) {
    // The node outlives the lease's lifetime several times over, awaiting as nodes do.
    let mut g = StateGraph::<Log>::new();
    g.add_node("slow", |_s: Arc<Log>, _c: Context| async {
        tokio::time::sleep(std::time::Duration::from_millis(450)).await;
        Ok::<_, NodeError>(LogUpdate::default().steps(vec!["slow".to_string()]))
    });
    g.add_edge(START, "slow").add_edge("slow", END);
    let saver = backend.saver();
    let graph = g.compile().unwrap().with_checkpointer(saver.clone());
    let mut config = RunConfig::new().thread("busy");
    config.lease_ttl = std::time::Duration::from_millis(90);
    let first = tokio::spawn({
        let graph = graph.clone();
        async move { graph.invoke(entries(&[]), config).await }
    });

    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let lease = saver
        .get_lease("busy")
        .await
        .unwrap()
        .expect("the run holds a lease");
    assert!(
        lease.expires_at_ms > now_ms(),
        "the lease was renewed past its first lifetime"
    );
    assert_busy(
        graph
            .invoke(entries(&[]), RunConfig::new().thread("busy"))
            .await
            .unwrap_err(),
        "a second run while the first renews its lease",
    );

    let out = first.await.unwrap().unwrap();
    assert_eq!(out.state.steps, strings(&["slow"]));
    assert!(
        saver.get_lease("busy").await.unwrap().is_none(),
        "released at the end"
    );
}
