//! Workers killed with SIGKILL mid-run. Worker processes (this test binary run again with the
//! hidden `worker_child` test selected) serve the queue; the parent kills them at random
//! moments and starts new ones, until every run is done. Then, for every run:
//!
//! - it ended `done`, as an uninterrupted run ends (same final state);
//! - its thread's checkpoints form one chain, one per step (no two workers wrote it);
//! - no saved step ran again: a step that ran in two processes was the last one the first of
//!   them began before it was killed (its step in flight, never saved).
//!
//! The evidence of executions lives outside the killed processes: every node appends
//! `THREAD STEP PID` to a log file (fsynced) before its body runs.

mod common;

use common::pg_cluster::cluster;
use common::*;
use serde_json::json;
use stategraph::checkpoint::Checkpointer;
use stategraph_postgres::queue::{RunQueue, Status, Submission};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_worker::{Worker, WorkerOptions};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const URL_ENV: &str = "STATEGRAPH_WORKER_CHILD_URL";
const RUNS: usize = 6;
const TARGET: u32 = 25;
const KILLS: usize = 8;

#[test]
#[ignore = "a worker process of the crash test, started by it"]
fn worker_child() {
    let Ok(url) = std::env::var(URL_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let options = WorkerOptions::new(url)
            .concurrency(3)
            .lease(Duration::from_millis(800))
            .heartbeat(Duration::from_millis(100))
            .idle_poll(Duration::from_millis(20));
        let worker = Worker::connect(registry(), options).await.unwrap();
        // Runs until killed.
        worker.run().await.unwrap();
    });
}

fn spawn_worker(url: &str, log: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["worker_child", "--exact", "--ignored", "--nocapture"])
        .arg("--test-threads=1")
        .env(URL_ENV, url)
        .env(LOG_ENV, log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn kill(child: &mut Child) {
    // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped yet, so its
    // pid cannot have been reused.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
    }
    child.wait().unwrap();
}

fn log_lines(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
}

/// Checks that every step that ran in two processes was the last step the earlier one began on
/// that thread (its step in flight when it was killed); returns how many steps ran again.
fn check_log(text: &str, killed: &HashSet<u32>) -> usize {
    // (thread, step) -> pids in the order they ran it; (thread, pid) -> the newest step begun.
    let mut ran: BTreeMap<(String, u64), Vec<u32>> = BTreeMap::new();
    let mut last: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let [thread, step, pid] = words[..] else {
            panic!("unreadable log line {line:?}")
        };
        let (step, pid): (u64, u32) = (step.parse().unwrap(), pid.parse().unwrap());
        ran.entry((thread.to_string(), step)).or_default().push(pid);
        let newest = last.entry((thread.to_string(), pid)).or_insert(step);
        *newest = (*newest).max(step);
    }
    let mut again = 0;
    for ((thread, step), pids) in &ran {
        for earlier in &pids[..pids.len() - 1] {
            assert!(
                killed.contains(earlier),
                "thread {thread} step {step}: run by {pids:?}, and {earlier} was not killed"
            );
            assert_eq!(
                last[&(thread.clone(), *earlier)],
                *step,
                "thread {thread}: step {step} ran again after pid {earlier} had begun a later \
                 step (so step {step} had been saved); pids {pids:?}"
            );
            again += 1;
        }
    }
    again
}

#[test]
fn workers_killed_mid_run_are_taken_over_from_the_last_checkpoint() {
    let started = Instant::now();
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("exec.log");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let queue = runtime.block_on(RunQueue::connect(db.url())).unwrap();
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let submission = Submission::input("steps", json!({ "target": TARGET }))
            .thread(format!("crash-{i}"))
            .overrides(["delay_ms=15"]);
        runs.push(runtime.block_on(queue.submit(submission)).unwrap());
    }
    // Two workers at a time; one of them killed at a random moment while the log grows, and
    // replaced by a new one.
    let mut workers = vec![spawn_worker(db.url(), &log), spawn_worker(db.url(), &log)];
    let mut killed = HashSet::new();
    let all_done = || {
        runs.iter().all(|r| {
            let info = runtime.block_on(queue.get(*r)).unwrap().unwrap();
            info.status.is_final()
        })
    };
    while killed.len() < KILLS && !all_done() {
        let before = log_lines(&log);
        let give_up = Instant::now() + Duration::from_secs(30);
        while log_lines(&log) < before + 3 {
            assert!(Instant::now() < give_up, "no worker made progress in 30 s");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rand::random::<u64>() % 120));
        let victim = rand::random::<usize>() % workers.len();
        let mut child = workers.swap_remove(victim);
        killed.insert(child.id());
        kill(&mut child);
        workers.push(spawn_worker(db.url(), &log));
    }
    let give_up = Instant::now() + Duration::from_secs(120);
    while !all_done() {
        assert!(Instant::now() < give_up, "runs left unfinished");
        std::thread::sleep(Duration::from_millis(50));
    }
    for mut w in workers {
        kill(&mut w);
    }

    let expected = serde_json::to_value(runtime.block_on(uninterrupted(TARGET))).unwrap();
    let store = runtime
        .block_on(PostgresCheckpointer::connect(db.url()))
        .unwrap();
    let graph = registry()
        .resolve("steps", &[])
        .unwrap()
        .build(Some(std::sync::Arc::new(
            runtime
                .block_on(PostgresCheckpointer::connect(db.url()))
                .unwrap(),
        )))
        .unwrap();
    let mut takeovers = 0;
    for (i, run) in runs.iter().enumerate() {
        let thread = format!("crash-{i}");
        let info = runtime.block_on(queue.get(*run)).unwrap().unwrap();
        assert_eq!(info.status, Status::Done, "{info:?}");
        takeovers += info.claims as usize - 1;
        let state = runtime.block_on(graph.get_state(&thread, None)).unwrap();
        assert!(state.next.is_empty());
        assert_eq!(
            state.values, expected,
            "thread {thread} ended otherwise than an uninterrupted run"
        );
        let chain = runtime
            .block_on(store.list_checkpoints(&thread, None, 1000))
            .unwrap();
        let steps: HashSet<_> = chain.iter().map(|c| c.step).collect();
        assert_eq!(
            steps.len(),
            chain.len(),
            "thread {thread}: two checkpoints of one step"
        );
        for pair in chain.windows(2) {
            assert_eq!(
                pair[0].parent_id,
                Some(pair[1].id),
                "thread {thread}: a forked chain"
            );
        }
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let again = check_log(&text, &killed);
    eprintln!(
        "{} kills, {takeovers} takeovers, {} node executions, {again} steps run again (each a \
         killed worker's step in flight), {:.1} s",
        killed.len(),
        text.lines().count(),
        started.elapsed().as_secs_f64()
    );
    assert!(takeovers > 0, "no run was taken over");
}

fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// Lines of the log written by `pid`.
fn lines_of(log: &Path, pid: u32) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let pid = pid.to_string();
    text.lines()
        .filter(|l| l.rsplit(' ').next() == Some(pid.as_str()))
        .count()
}

#[test]
fn a_worker_frozen_past_its_lease_is_fenced_off_when_it_wakes() {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("exec.log");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let queue = runtime.block_on(RunQueue::connect(db.url())).unwrap();
    let submission = Submission::input("steps", json!({ "target": 40 }))
        .thread("frozen")
        .overrides(["delay_ms=25"]);
    let run = runtime.block_on(queue.submit(submission)).unwrap();
    let mut frozen = spawn_worker(db.url(), &log);
    let give_up = Instant::now() + Duration::from_secs(30);
    while log_lines(&log) < 5 {
        assert!(
            Instant::now() < give_up,
            "the first worker made no progress"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    signal(&frozen, libc::SIGSTOP);
    let mut other = spawn_worker(db.url(), &log);
    let info = runtime
        .block_on(async { wait_for(&queue, run, Duration::from_secs(60), is(Status::Done)).await });
    let before_waking = lines_of(&log, frozen.id());
    signal(&frozen, libc::SIGCONT);
    // Long enough for its step in flight to end and be refused, and for a heartbeat.
    std::thread::sleep(Duration::from_millis(1500));
    let after = runtime.block_on(queue.get(run)).unwrap().unwrap();
    kill(&mut frozen);
    kill(&mut other);

    assert_eq!(after, info, "the woken worker changed nothing of the run");
    assert_eq!(info.claims, 2);
    let taker = other.id().to_string();
    assert!(info.worker.as_deref().unwrap().contains(&taker), "{info:?}");
    assert_eq!(
        lines_of(&log, frozen.id()),
        before_waking,
        "the woken worker ran no further node"
    );
    let store = runtime
        .block_on(PostgresCheckpointer::connect(db.url()))
        .unwrap();
    let chain = runtime
        .block_on(store.list_checkpoints("frozen", None, 1000))
        .unwrap();
    for pair in chain.windows(2) {
        assert_eq!(pair[0].parent_id, Some(pair[1].id), "a forked chain");
    }
    let graph = registry()
        .resolve("steps", &[])
        .unwrap()
        .build(Some(std::sync::Arc::new(store)))
        .unwrap();
    let state = runtime.block_on(graph.get_state("frozen", None)).unwrap();
    let expected = serde_json::to_value(runtime.block_on(uninterrupted(40))).unwrap();
    assert_eq!(state.values, expected);
    let killed = HashSet::from([frozen.id()]);
    check_log(&std::fs::read_to_string(&log).unwrap(), &killed);
}
