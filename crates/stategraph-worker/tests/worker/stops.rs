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
