//! The run queue's storage, as workers use it: claims under fenced leases, stops, strategies.
//! (Running the runs is `stategraph-worker`'s; its tests run graphs through this queue.)

use super::support::pg_cluster::cluster;
use serde_json::json;
use stategraph_postgres::queue::{
    Outcome, QueueError, RunFilter, RunQueue, Start, Status, Stop, Strategy, Submission,
};
use std::collections::HashSet;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(30);

fn run_of(thread: &str) -> Submission {
    Submission::input("steps", json!({"target": 3})).thread(thread)
}

#[tokio::test]
async fn a_run_is_enqueued_claimed_and_finished() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let id = queue
        .submit(run_of("t1").metadata(json!({"user": "ann", "note": "a\u{0}b"})))
        .await
        .unwrap();
    let queued = queue.get(id).await.unwrap().unwrap();
    assert_eq!(queued.status, Status::Queued);
    assert_eq!(
        queued.metadata["note"], "a\u{0}b",
        "a NUL character is data"
    );

    let claimed = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!((claimed.id, claimed.thread.as_str()), (id, "t1"));
    assert_eq!(claimed.start, Start::Input(json!({"target": 3})));
    assert_eq!(
        (claimed.claims, claimed.stop, claimed.started),
        (1, None, false)
    );
    assert!(
        queue.claim("w2", LEASE).await.unwrap().is_none(),
        "nothing else is queued"
    );

    let running = queue.list(&RunFilter::default()).await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].status, Status::Running);
    assert_eq!(running[0].worker.as_deref(), Some("w1"));
    assert!(running[0].since_ms > 0 && running[0].lease_expires_ms.is_some());

    assert_eq!(
        queue.heartbeat(id, claimed.epoch, LEASE).await.unwrap(),
        None
    );
    queue
        .finish(id, claimed.epoch, Outcome::Done)
        .await
        .unwrap();
    let done = queue.get(id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.worker.as_deref()),
        (Status::Done, Some("w1"))
    );
    let err = queue
        .finish(id, claimed.epoch, Outcome::Done)
        .await
        .unwrap_err();
    assert!(matches!(err, QueueError::Lost { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_claiming_together_never_claim_the_same_run() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let mut submitted = HashSet::new();
    for i in 0..60 {
        submitted.insert(queue.submit(run_of(&format!("t{i}"))).await.unwrap());
    }
    let claimers: Vec<_> = (0..6)
        .map(|w| {
            let url = db.url().to_string();
            tokio::spawn(async move {
                // A queue of its own: one worker process each.
                let queue = RunQueue::connect(&url).await.unwrap();
                let mut mine = Vec::new();
                while let Some(run) = queue.claim(&format!("w{w}"), LEASE).await.unwrap() {
                    mine.push(run.id);
                    queue
                        .finish(run.id, run.epoch, Outcome::Done)
                        .await
                        .unwrap();
                }
                mine
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for c in claimers {
        claimed.extend(c.await.unwrap());
    }
    let unique: HashSet<_> = claimed.iter().copied().collect();
    assert_eq!(claimed.len(), unique.len(), "a run was claimed twice");
    assert_eq!(unique, submitted, "every run was claimed");
}

#[tokio::test]
async fn a_run_whose_lease_lapsed_is_claimed_again_and_its_old_worker_is_fenced_off() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let id = queue.submit(run_of("t1")).await.unwrap();
    let first = queue
        .claim("w1", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    queue.mark_started(id, first.epoch, None).await.unwrap();
    assert!(queue.claim("w2", LEASE).await.unwrap().is_none(), "leased");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let listed = queue.get(id).await.unwrap().unwrap();
    assert!(listed.lapsed, "a lapsed lease is listed as such");

    let second = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(second.id, id);
    assert!(second.epoch > first.epoch);
    assert_eq!((second.claims, second.started), (2, true));
    for err in [
        queue.heartbeat(id, first.epoch, LEASE).await.unwrap_err(),
        queue
            .finish(id, first.epoch, Outcome::Done)
            .await
            .unwrap_err(),
        queue.release(id, first.epoch).await.unwrap_err(),
    ] {
        assert!(matches!(err, QueueError::Lost { .. }), "{err}");
    }
    queue
        .finish(id, second.epoch, Outcome::Paused)
        .await
        .unwrap();
    let run = queue.get(id).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.worker.as_deref()),
        (Status::Paused, Some("w2"))
    );
}

#[tokio::test]
async fn a_cancelled_run_is_never_claimed_and_a_running_one_is_asked_to_stop() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let queued = queue.submit(run_of("t1")).await.unwrap();
    assert_eq!(queue.cancel(queued).await.unwrap(), Status::Cancelled);
    assert!(queue.is_cancelled(queued).await.unwrap());
    assert!(queue.claim("w1", LEASE).await.unwrap().is_none());

    let running = queue.submit(run_of("t2")).await.unwrap();
    let claim = queue
        .claim("w1", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert!(!queue.is_cancelled(running).await.unwrap());
    assert_eq!(queue.cancel(running).await.unwrap(), Status::Running);
    assert!(queue.is_cancelled(running).await.unwrap());
    assert_eq!(
        queue
            .heartbeat(running, claim.epoch, Duration::from_millis(200))
            .await
            .unwrap(),
        Some(Stop::Cancel)
    );
    // Its worker dies before it stops: the next worker is told, and never runs it on.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let next = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!((next.id, next.stop), (running, Some(Stop::Cancel)));
    queue
        .finish(running, next.epoch, Outcome::Cancelled("cancelled".into()))
        .await
        .unwrap();
    let run = queue.get(running).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.message.as_deref()),
        (Status::Cancelled, Some("cancelled"))
    );
    assert_eq!(
        queue.cancel(running).await.unwrap(),
        Status::Cancelled,
        "already ended"
    );
}

#[tokio::test]
async fn a_threads_runs_go_one_at_a_time_and_a_submit_follows_its_strategy() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let first = queue.submit(run_of("t")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();

    // reject
    let err = queue
        .submit(run_of("t").strategy(Strategy::Reject))
        .await
        .unwrap_err();
    match &err {
        QueueError::Busy {
            thread,
            run,
            status,
        } => {
            assert_eq!(
                (thread.as_str(), *run, *status),
                ("t", first, Status::Running)
            )
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // enqueue: waits behind the running one, while another thread's run goes first.
    let second = queue.submit(run_of("t")).await.unwrap();
    let other = queue.submit(run_of("u")).await.unwrap();
    let next = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(
        next.id, other,
        "the thread's second run waits for its first"
    );
    queue
        .finish(other, next.epoch, Outcome::Done)
        .await
        .unwrap();

    // interrupt: the queued one is cancelled, the running one asked to stop.
    let third = queue
        .submit(run_of("t").strategy(Strategy::Interrupt))
        .await
        .unwrap();
    let second_info = queue.get(second).await.unwrap().unwrap();
    assert_eq!(second_info.status, Status::Cancelled);
    assert!(second_info.message.unwrap().contains(&third.to_string()));
    assert_eq!(
        queue.heartbeat(first, claim.epoch, LEASE).await.unwrap(),
        Some(Stop::Interrupt)
    );
    assert!(
        queue.claim("w2", LEASE).await.unwrap().is_none(),
        "the first still runs"
    );

    // rollback outranks the interrupt; only a cancelled outcome is then recorded.
    let fourth = queue
        .submit(run_of("t").strategy(Strategy::Rollback))
        .await
        .unwrap();
    assert_eq!(
        queue.get(third).await.unwrap().unwrap().status,
        Status::Cancelled
    );
    assert_eq!(
        queue.heartbeat(first, claim.epoch, LEASE).await.unwrap(),
        Some(Stop::Rollback)
    );
    let err = queue
        .finish(first, claim.epoch, Outcome::Done)
        .await
        .unwrap_err();
    assert!(
        matches!(err, QueueError::RollbackAsked(r) if r == first),
        "{err}"
    );
    queue
        .finish(first, claim.epoch, Outcome::Cancelled("rolled back".into()))
        .await
        .unwrap();
    let now = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(
        now.id, fourth,
        "the rollback's run goes once the first stopped"
    );

    let runs = queue.list(&RunFilter::default().thread("t")).await.unwrap();
    let statuses: Vec<Status> = runs.iter().map(|r| r.status).collect();
    use Status::*;
    assert_eq!(
        statuses,
        [Running, Cancelled, Cancelled, Cancelled],
        "newest first"
    );
}

#[tokio::test]
async fn cancelling_a_thread_cancels_its_queued_runs_and_stops_its_running_one() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let first = queue.submit(run_of("busy")).await.unwrap();
    let second = queue.submit(run_of("busy")).await.unwrap();
    let other = queue.submit(run_of("other")).await.unwrap();
    let claimed = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(claimed.id, first);

    let cancelled = queue.cancel_thread("busy").await.unwrap();
    assert_eq!(
        cancelled,
        vec![(first, Status::Running), (second, Status::Cancelled)]
    );
    assert_eq!(
        queue.heartbeat(first, claimed.epoch, LEASE).await.unwrap(),
        Some(Stop::Cancel),
        "the running one hears it with its next heartbeat"
    );
    let untouched = queue.get(other).await.unwrap().unwrap();
    assert_eq!(untouched.status, Status::Queued);
    assert!(
        queue.cancel_thread("idle").await.unwrap().is_empty(),
        "a thread with no run has nothing to cancel"
    );
}

/// A stop stored while the run's last step was in flight, which its worker never read (no
/// heartbeat in between): the run ended on its own, and the worker records that. The stop holds
/// all the same: the one who cancelled was told it stops (`graph cancel` returned `running`).
#[tokio::test]
async fn a_stop_stored_before_the_outcome_holds_whatever_the_last_step_ended_it_as() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();

    // A cancel, then the run reached its end.
    let done = queue.submit(run_of("late-cancel")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(queue.cancel(done).await.unwrap(), Status::Running);
    let recorded = queue.finish(done, claim.epoch, Outcome::Done).await;
    assert_eq!(recorded.unwrap(), Status::Cancelled);
    let run = queue.get(done).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.message.as_deref()),
        (
            Status::Cancelled,
            Some("cancelled; the run had already reached its end")
        )
    );

    // An interrupt (a newer run of the thread), then the run paused for an answer.
    let paused = queue.submit(run_of("late-interrupt")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(claim.id, paused);
    let newer = run_of("late-interrupt").strategy(Strategy::Interrupt);
    let newer = queue.submit(newer).await.unwrap();
    let recorded = queue.finish(paused, claim.epoch, Outcome::Paused).await;
    assert_eq!(recorded.unwrap(), Status::Cancelled);
    let run = queue.get(paused).await.unwrap().unwrap();
    assert_eq!(
        run.message.as_deref(),
        Some("interrupted by a newer run of its thread; the run had already paused for an answer")
    );
    // The newer run is next, on a thread no longer waiting for a resume of the old one.
    let next = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(next.id, newer);

    // A failure keeps its reason in the message.
    let failed = queue.submit(run_of("late-fail")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(claim.id, failed);
    queue.cancel(failed).await.unwrap();
    let outcome = Outcome::Failed("the model refused".into());
    assert_eq!(
        queue.finish(failed, claim.epoch, outcome).await.unwrap(),
        Status::Cancelled
    );
    let run = queue.get(failed).await.unwrap().unwrap();
    assert_eq!(
        run.message.as_deref(),
        Some("cancelled; the run had already failed: the model refused")
    );

    // Without a stop, the outcome is recorded as it is; a cancel after it changes nothing.
    let plain = queue.submit(run_of("plain")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(claim.id, plain);
    let recorded = queue.finish(plain, claim.epoch, Outcome::Done).await;
    assert_eq!(recorded.unwrap(), Status::Done);
    assert_eq!(queue.cancel(plain).await.unwrap(), Status::Done);
    assert_eq!(
        queue.get(plain).await.unwrap().unwrap().status,
        Status::Done
    );
}

/// A draining worker gives back a run that was cancelled meanwhile: it ends there, cancelled,
/// rather than waiting queued for a worker to cancel it.
#[tokio::test]
async fn a_run_given_back_after_a_cancel_ends_cancelled() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let run = queue.submit(run_of("drained")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    assert_eq!(queue.cancel(run).await.unwrap(), Status::Running);
    let released = queue.release(run, claim.epoch).await.unwrap();
    assert_eq!(released, Status::Cancelled);
    let info = queue.get(run).await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.message.as_deref()),
        (Status::Cancelled, Some("cancelled"))
    );
    assert!(queue.claim("w2", LEASE).await.unwrap().is_none());

    // Without a stop it is queued again, for the next worker.
    let again = queue.submit(run_of("drained-2")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    let released = queue.release(again, claim.epoch).await.unwrap();
    assert_eq!(released, Status::Queued);
    let next = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!((next.id, next.claims), (again, 2));
}

/// A run that started, then was given back to the queue (its worker drained), is superseded by
/// a rollback: it saved checkpoints, which must be dropped, so it is not cancelled on the spot
/// (that would keep them) but stays queued with the rollback asked, for the next worker to
/// drop them; a cancel then does not outrank the rollback.
#[tokio::test]
async fn a_rollback_of_a_run_given_back_is_left_for_a_worker_to_drop_its_checkpoints() {
    let db = cluster().database();
    let queue = RunQueue::connect(db.url()).await.unwrap();
    let first = queue.submit(run_of("given-back")).await.unwrap();
    let claim = queue.claim("w1", LEASE).await.unwrap().unwrap();
    queue.mark_started(first, claim.epoch, None).await.unwrap();
    queue.release(first, claim.epoch).await.unwrap();
    // One never started: a rollback ends it at once.
    let waiting = queue.submit(run_of("given-back")).await.unwrap();

    let rollback = run_of("given-back").strategy(Strategy::Rollback);
    let newer = queue.submit(rollback).await.unwrap();
    let old = queue.get(first).await.unwrap().unwrap();
    assert_eq!(
        (old.status, old.stop),
        (Status::Queued, Some(Stop::Rollback))
    );
    let never = queue.get(waiting).await.unwrap().unwrap();
    assert_eq!(never.status, Status::Cancelled);
    assert_eq!(queue.cancel(first).await.unwrap(), Status::Queued);

    let next = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(
        (next.id, next.stop, next.started),
        (first, Some(Stop::Rollback), true)
    );
    let refused = queue.finish(first, next.epoch, Outcome::Done).await;
    assert!(
        matches!(refused, Err(QueueError::RollbackAsked(_))),
        "{refused:?}"
    );
    let message = Outcome::Cancelled(Stop::Rollback.message().into());
    let recorded = queue.finish(first, next.epoch, message).await.unwrap();
    assert_eq!(recorded, Status::Cancelled);
    let then = queue.claim("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(then.id, newer);
}
