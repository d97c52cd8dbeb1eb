//! A take of a thread dropped at each of its awaits (what a `graph run` stopped in its first
//! moments does to it, or a request given up) leaves a whole thread, the thread as it was, or
//! nothing: never a folder that is no thread, a damaged thread, or a lock the next writer waits
//! on.
//!
//! Each take is polled a given number of times, letting its work on tokio's blocking threads
//! finish between polls, then dropped: right after its last poll (that work still running) or
//! a moment later (that work done, its result never collected). The counts go up until the take
//! completes, so every await of it is a place where one was dropped.

use stategraph_checkpoint::{CheckpointError, CheckpointId, Checkpointer};
use stategraph_checkpoint_conformance::records::chained;
use stategraph_sled::FolderCheckpointer;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

/// More polls than any take needs: one that has not completed by then waits forever.
const MOST_POLLS: usize = 12;
/// Longer than a take's work on a blocking thread takes here.
const SETTLE: Duration = Duration::from_millis(40);

/// The names in the store's `threads` folder, the layout's own dot-folders included.
fn entries(db: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(db.join("threads")) {
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot list the threads folder: {e}"),
    };
    names.sort();
    names
}

/// How a take polled `polls` times ended.
enum Ended<T> {
    Completed(T),
    /// Dropped after its last poll; `made` says whether its thread's folder was there then.
    Dropped {
        made: bool,
    },
}

/// Polls `take` up to `polls` times, `SETTLE` apart, and drops it unless it completed: at once
/// after its last poll, or `SETTLE` later when `late`.
async fn poll_then_drop<T>(
    take: impl Future<Output = T>,
    polls: usize,
    late: bool,
    folder: &Path,
) -> Ended<T> {
    // Boxed, so that dropping it below drops the take itself.
    let mut take = Box::pin(take);
    for i in 0..polls {
        if i > 0 {
            tokio::time::sleep(SETTLE).await;
        }
        if let Poll::Ready(out) = poll_once(take.as_mut()).await {
            return Ended::Completed(out);
        }
    }
    if late {
        tokio::time::sleep(SETTLE).await;
    }
    let made = folder.exists();
    drop(take);
    Ended::Dropped { made }
}

async fn poll_once<F: Future>(mut f: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await
}

/// A writer in a second store over the same folder (as another process) takes the thread
/// without waiting for anyone: `make` it anew or `hold` it.
async fn taken_at_once(db: &Path, thread: &str, make: bool) -> FolderCheckpointer {
    let other = FolderCheckpointer::open(db).unwrap();
    let began = Instant::now();
    match make {
        true => other.create(thread).await.unwrap(),
        false => other.hold(thread).await.unwrap(),
    }
    assert!(
        began.elapsed() < Duration::from_millis(500),
        "the next writer waited {:?}",
        began.elapsed()
    );
    other
}

/// Drops a take that makes thread `t` (`make` is the take, on a fresh store) at each of its
/// awaits, and at least once after its folder was made.
async fn a_new_thread_is_made_whole_or_not_at_all<F, Fut>(make: F, what: &str)
where
    F: Fn(std::sync::Arc<FolderCheckpointer>) -> Fut,
    Fut: Future<Output = Result<(), CheckpointError>>,
{
    let mut dropped_with_folder = 0;
    let mut completed = false;
    for polls in 0..MOST_POLLS {
        for late in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path();
            let store = std::sync::Arc::new(FolderCheckpointer::open(db).unwrap());
            let folder = db.join("threads").join("t");
            let context = format!("{what}: {polls} polls, dropped late: {late}");
            match poll_then_drop(make(store.clone()), polls, late, &folder).await {
                Ended::Completed(made) => {
                    made.unwrap();
                    completed = true;
                    // Whole: held here and served to others, then written and listed.
                    let other = FolderCheckpointer::open(db).unwrap();
                    assert!(other.is_running("t").await, "{context}");
                    store.put_checkpoint(&chained("t", 1), true).await.unwrap();
                    store.release("t").unwrap();
                    let listed = other.threads().await.unwrap();
                    assert_eq!(listed.len(), 1, "{context}");
                    assert!(listed[0].damage.is_none(), "{context}");
                }
                Ended::Dropped { made } => {
                    dropped_with_folder += usize::from(made);
                    // Waits for a take being undone.
                    store.close();
                    assert_eq!(entries(db), Vec::<String>::new(), "{context}");
                    let other = taken_at_once(db, "t", true).await;
                    other.close();
                }
            }
        }
        if completed {
            break;
        }
    }
    assert!(completed, "{what}: never completed in {MOST_POLLS} polls");
    assert!(
        dropped_with_folder > 0,
        "{what}: never dropped after its folder was made: the test reaches no await there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_dropped_at_any_await_leaves_a_whole_thread_or_nothing() {
    a_new_thread_is_made_whole_or_not_at_all(
        |store| async move { store.create("t").await },
        "create",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_write_dropped_at_any_await_leaves_a_whole_thread_or_nothing() {
    a_new_thread_is_made_whole_or_not_at_all(
        |store| async move {
            store
                .put_journal("t", "origin", &serde_json::json!({"graph": "g"}))
                .await
        },
        "put_journal",
    )
    .await;
}

/// A thread with one checkpoint, let go; its index removed when `unindexed` (a run killed
/// before it wrote one: the take then checks the store on a copy, one await more).
async fn a_thread_let_go(db: &Path, unindexed: bool) {
    let store = FolderCheckpointer::open(db).unwrap();
    store.put_checkpoint(&chained("t", 1), true).await.unwrap();
    store.release("t").unwrap();
    if unindexed {
        std::fs::remove_file(db.join("threads/t/index.json")).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_dropped_at_any_await_leaves_the_thread_as_it_was() {
    for unindexed in [false, true] {
        let mut completed_at = None;
        for polls in 0..MOST_POLLS {
            for late in [false, true] {
                let dir = tempfile::tempdir().unwrap();
                let db = dir.path();
                a_thread_let_go(db, unindexed).await;
                let store = FolderCheckpointer::open(db).unwrap();
                let folder = db.join("threads").join("t");
                let context = format!("unindexed: {unindexed}, {polls} polls, late: {late}");
                match poll_then_drop(store.hold("t"), polls, late, &folder).await {
                    Ended::Completed(held) => {
                        held.unwrap();
                        completed_at = Some(polls);
                        store.release("t").unwrap();
                    }
                    Ended::Dropped { .. } => store.close(),
                }
                // As it was: one folder, listed undamaged with its checkpoint, and taken by
                // the next writer at once.
                assert_eq!(entries(db), ["t"], "{context}");
                let other = taken_at_once(db, "t", false).await;
                let newest = other.get_checkpoint("t", None).await.unwrap().unwrap();
                assert_eq!(newest.id, CheckpointId::from_u128(1), "{context}");
                other.release("t").unwrap();
                let listed = other.threads().await.unwrap();
                assert_eq!(listed.len(), 1, "{context}");
                assert!(listed[0].damage.is_none(), "{context}: {listed:?}");
            }
            if completed_at.is_some() {
                break;
            }
        }
        let polls = completed_at.expect("the hold completed");
        // Its checks and its open are on blocking threads: awaits the loop dropped it at.
        assert!(polls >= 2, "unindexed: {unindexed}: done in {polls} polls");
    }
}

/// With real timing rather than counted polls: takes of new threads given up after growing
/// timeouts. Every folder left is a thread that was made whole (and then written), none other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_given_up_after_any_time_leave_only_whole_threads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    let store = FolderCheckpointer::open(db).unwrap();
    let mut made = Vec::new();
    for i in 0..40u64 {
        let thread = format!("t{i:02}");
        let patience = Duration::from_micros(i * i * 50);
        if let Ok(created) = tokio::time::timeout(patience, store.create(&thread)).await {
            created.unwrap();
            store
                .put_checkpoint(&chained(&thread, 1), true)
                .await
                .unwrap();
            store.release(&thread).unwrap();
            made.push(thread);
        }
    }
    store.close();
    assert!(!made.is_empty(), "no take completed within 76 ms");
    assert_eq!(entries(db), made);
    let listed: Vec<String> = FolderCheckpointer::open(db)
        .unwrap()
        .threads()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.thread_id)
        .collect();
    assert_eq!(listed, made);
}
