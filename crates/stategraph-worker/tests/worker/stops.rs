//! Stops: cancellations stored in the queue, and a busy thread's strategies.

use super::*;
use stategraph_postgres::queue::{QueueError, Strategy};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cancelled_before_a_worker_claims_it_never_runs() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let never = queue.submit(steps("never", 3, 5)).await.unwrap();
    assert_eq!(queue.cancel(never).await.unwrap(), Status::Cancelled);
    let worker = Running::start(&db, 1).await;
    let after = queue.submit(steps("after", 2, 5)).await.unwrap();
    assert_eq!(wait_final(&queue, after, WAIT).await.status, Status::Done);
    let never = queue.get(never).await.unwrap().unwrap();
    assert_eq!((never.status, never.claims), (Status::Cancelled, 0));
    assert!(steps_run("never").is_empty());
    worker.drain().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_run_cancelled_stops_at_its_next_step_with_that_step_saved() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 1).await;
    let run = queue.submit(steps("stopped", 100, 100)).await.unwrap();
    wait_for(&queue, run, WAIT, |_| steps_run("stopped").len() >= 3).await;
    let started = steps_run("stopped").len();
    assert_eq!(queue.cancel(run).await.unwrap(), Status::Running);
    let ended = wait_final(&queue, run, WAIT).await;
    assert_eq!(
        (ended.status, ended.message.as_deref()),
        (Status::Cancelled, Some("cancelled"))
    );
    let saved = ticks(&state_of(&db, "stopped").await);
    // The step in flight when the cancel was read (a heartbeat is 50 ms, a step 100 ms, so
    // the one counted above or the next) was finished and saved...
    assert!(
        saved >= started && saved <= started + 1,
        "{started} steps begun at the cancel, {saved} saved"
    );
    // ...and no node of a later step began: every step begun was saved.
    assert_eq!(steps_run("stopped").len(), saved);
    let report = worker.drain().await;
    assert_eq!(report.cancelled, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reject_refuses_and_enqueue_runs_after() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 2).await;
    let first = queue.submit(steps("queued", 5, 30)).await.unwrap();
    wait_for(&queue, first, WAIT, is(Status::Running)).await;
    let err = queue
        .submit(steps("queued", 9, 5).strategy(Strategy::Reject))
        .await
        .unwrap_err();
    assert!(
        matches!(err, QueueError::Busy { run, .. } if run == first),
        "{err}"
    );
    // Enqueued: runs once the first is done, on the thread as the first left it.
    let second = queue.submit(steps("queued", 8, 5)).await.unwrap();
    let (a, b) = (
        wait_final(&queue, first, WAIT).await,
        wait_final(&queue, second, WAIT).await,
    );
    assert_eq!((a.status, b.status), (Status::Done, Status::Done));
    assert!(b.since_ms >= a.since_ms);
    assert_eq!(
        ticks(&state_of(&db, "queued").await),
        8,
        "5 ticks, then 3 more"
    );
    worker.drain().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interrupt_stops_the_running_run_and_the_new_one_starts_where_it_stopped() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 2).await;
    let first = queue.submit(steps("interrupted", 100, 50)).await.unwrap();
    wait_for(&queue, first, WAIT, |_| steps_run("interrupted").len() >= 3).await;
    let second = queue
        .submit(steps("interrupted", 2, 5).strategy(Strategy::Interrupt))
        .await
        .unwrap();
    let a = wait_final(&queue, first, WAIT).await;
    assert_eq!(a.status, Status::Cancelled);
    assert!(
        a.message.as_deref().unwrap().contains("interrupted"),
        "{a:?}"
    );
    assert_eq!(wait_final(&queue, second, WAIT).await.status, Status::Done);
    let done = state_of(&db, "interrupted").await["done"].clone();
    let done = done.as_array().unwrap();
    // The first run's progress is kept, and the new run's one tick follows it.
    assert!(done.len() >= 4, "{done:?}");
    worker.drain().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rollback_stops_the_running_run_and_drops_what_it_saved() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let worker = Running::start(&db, 2).await;
    let before = queue.submit(steps("rolled", 2, 5)).await.unwrap();
    assert_eq!(wait_final(&queue, before, WAIT).await.status, Status::Done);
    let base = state_of(&db, "rolled").await;
    assert_eq!(ticks(&base), 2);

    let first = queue.submit(steps("rolled", 100, 50)).await.unwrap();
    wait_for(&queue, first, WAIT, |_| steps_run("rolled").len() >= 2 + 3).await;
    let second = queue
        .submit(steps("rolled", 2, 5).strategy(Strategy::Rollback))
        .await
        .unwrap();
    let a = wait_final(&queue, first, WAIT).await;
    assert_eq!(a.status, Status::Cancelled);
    assert!(
        a.message.as_deref().unwrap().contains("rolled back"),
        "{a:?}"
    );
    assert_eq!(wait_final(&queue, second, WAIT).await.status, Status::Done);
    // The thread as it was before the first run, then the new run's one tick.
    let done = state_of(&db, "rolled").await["done"].clone();
    let mut expected = base["done"].as_array().unwrap().clone();
    assert_eq!(done.as_array().unwrap().len(), 3, "{done}");
    expected.truncate(2);
    assert_eq!(done.as_array().unwrap()[..2], expected[..]);
    worker.drain().await;
}

/// A stop stored while the run's last step is in flight: no step boundary is left to obey it
/// at, and the worker does not read it before the run ends (its heartbeat is far off). The
/// run ended on its own, yet the one who stopped it was told it stops: it ends cancelled,
/// saying what it had reached. Each case is played out step by step with a gate on the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_stored_during_the_last_step_holds_when_the_run_ends_on_its_own() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    // No heartbeat within the test: the stop is met only when the outcome is recorded.
    let options = options(&db, 2)
        .lease(Duration::from_secs(60))
        .heartbeat(Duration::from_secs(20));
    let worker = Running::start_with(options).await;

    // Cancelled, then the run reached its end.
    let done = Submission::input("gated", json!({})).thread("late-cancel");
    let done = queue.submit(done).await.unwrap();
    // Interrupted by a newer run, then the run paused for an answer.
    let paused = Submission::input("gated_ask", json!({})).thread("late-interrupt");
    let paused = queue.submit(paused).await.unwrap();
    wait_for(&queue, paused, WAIT, |_| {
        !steps_run("late-cancel").is_empty() && !steps_run("late-interrupt").is_empty()
    })
    .await;
    assert_eq!(queue.cancel(done).await.unwrap(), Status::Running);
    let newer = Submission::input("gated", json!({})).thread("late-interrupt");
    let newer = queue
        .submit(newer.strategy(Strategy::Interrupt))
        .await
        .unwrap();
    open_gate("late-cancel");
    open_gate("late-interrupt");

    let a = wait_final(&queue, done, WAIT).await;
    assert_eq!(
        (a.status, a.message.as_deref()),
        (
            Status::Cancelled,
            Some("cancelled; the run had already reached its end")
        )
    );
    let b = wait_final(&queue, paused, WAIT).await;
    assert_eq!(b.status, Status::Cancelled, "{b:?}");
    assert!(
        b.message.as_deref().unwrap().contains("interrupted"),
        "{b:?}"
    );
    assert_eq!(wait_final(&queue, newer, WAIT).await.status, Status::Done);
    let report = worker.drain().await;
    assert_eq!((report.cancelled, report.done, report.paused), (2, 1, 0));
}

/// A worker drains (SIGTERM) and its run is cancelled in the same moment: the run, given back
/// with its step saved, ends cancelled at once; it is not queued again for a worker to cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cancelled_while_its_worker_drains_ends_cancelled() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let options = options(&db, 1)
        .lease(Duration::from_secs(60))
        .heartbeat(Duration::from_secs(20));
    let worker = Running::start_with(options).await;
    // `wait`, then `ask`: the drain stops the run at the boundary between them.
    let run = Submission::input("gated_ask", json!({})).thread("drain-cancel");
    let run = queue.submit(run).await.unwrap();
    wait_for(&queue, run, WAIT, |_| !steps_run("drain-cancel").is_empty()).await;
    let draining = tokio::spawn(async move { worker.drain().await });
    // The worker hears its drain at once (a task waiting on it); the step is still in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(queue.cancel(run).await.unwrap(), Status::Running);
    open_gate("drain-cancel");
    let report = draining.await.unwrap();
    let ended = queue.get(run).await.unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.message.as_deref()),
        (Status::Cancelled, Some("cancelled"))
    );
    assert_eq!((report.cancelled, report.released), (1, 0));
}
