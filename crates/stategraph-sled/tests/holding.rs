//! Holding a thread between runs, as a server does: a thread made with journal records only is
//! taken with `hold_stored`; a writer in another process (here a second `FolderCheckpointer`
//! over the same folder, which locks and serves as a process does) waits for a holder that
//! runs nothing, and is refused at once by one that runs the thread (a live lease); a thread
//! let go in the background is taken again once its store has closed, with all it held.

use stategraph_checkpoint::{CheckpointError, Checkpointer, Lease};
use stategraph_sled::FolderCheckpointer;
use std::time::{Duration, Instant};

fn lease(ms: u64) -> Lease {
    Lease {
        owner: "run-1".into(),
        pid: std::process::id(),
        host: "this host".into(),
        expires_at_ms: stategraph_checkpoint::now_ms() + ms,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_of_journal_records_only_is_held_with_hold_stored_never_made() {
    let db = tempfile::tempdir().unwrap();
    let store = FolderCheckpointer::open(db.path()).unwrap();
    store
        .put_journal("t", "record", &serde_json::json!({"made": 1}))
        .await
        .unwrap();
    store.release("t").unwrap();

    // No checkpoint: `hold` refuses it, `hold_stored` takes it.
    assert!(matches!(
        store.hold("t").await,
        Err(CheckpointError::ThreadNotFound { .. })
    ));
    store.hold_stored("t").await.unwrap();
    let other = FolderCheckpointer::open(db.path()).unwrap();
    assert!(other.is_running("t").await, "held, and served to others");
    store.release("t").unwrap();

    // A thread with no store is not made by it.
    assert!(matches!(
        store.hold_stored("nobody").await,
        Err(CheckpointError::ThreadNotFound { .. })
    ));
    assert!(!db.path().join("threads").join("nobody").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_a_holder_that_runs_nothing_and_not_for_one_that_runs() {
    let db = tempfile::tempdir().unwrap();
    let holder = std::sync::Arc::new(FolderCheckpointer::open(db.path()).unwrap());
    let writer = FolderCheckpointer::open(db.path()).unwrap();
    holder
        .put_journal("t", "record", &serde_json::json!(1))
        .await
        .unwrap();

    // Held, no lease: the writer waits until the holder lets go (here after 300 ms).
    let letting = holder.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        letting.release("t").unwrap();
    });
    let began = Instant::now();
    writer
        .put_journal("t", "note", &serde_json::json!(2))
        .await
        .unwrap();
    assert!(began.elapsed() >= Duration::from_millis(250), "it waited");
    writer.release("t").unwrap();

    // Held with a live lease (a run): refused at once, naming the holder.
    holder
        .swap_lease("t", None, Some(&lease(60_000)))
        .await
        .unwrap()
        .unwrap();
    let began = Instant::now();
    let refused = writer.put_journal("t", "note", &serde_json::json!(3)).await;
    assert!(
        matches!(refused, Err(CheckpointError::ThreadBusy { pid, .. }) if pid == std::process::id()),
        "{refused:?}"
    );
    assert!(began.elapsed() < Duration::from_secs(2), "refused at once");
    holder.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_let_go_in_the_background_is_taken_again_with_all_it_held() {
    let db = tempfile::tempdir().unwrap();
    let store = FolderCheckpointer::open(db.path()).unwrap();
    for round in 0..5 {
        store
            .put_journal("t", "round", &serde_json::json!(round))
            .await
            .unwrap();
        // Detached at once; the next write takes it again once its store has closed.
        store.release_in_background("t");
    }
    store.close();
    assert!(
        db.path().join("threads/t/index.json").is_file(),
        "closed and indexed before close() returned"
    );
    let reader = FolderCheckpointer::open(db.path()).unwrap();
    assert_eq!(
        reader.get_journal("t", "round").await.unwrap(),
        Some(serde_json::json!(4))
    );
    assert!(!reader.is_running("t").await, "nobody holds it");
}
