//! The per-thread layout's mark of a thread never written (`threads/ID/new`,
//! `checkpoint/folders/layout.rs`), end to end with real processes: it goes as soon as the
//! thread's store holds a record on disk, so a thread whose store is later emptied by damage is
//! listed as damaged, never dropped as one that was never written.

#[path = "support/cli.rs"]
mod harness;

use harness::Db;

#[test]
fn a_run_killed_after_its_first_checkpoints_keeps_no_mark_and_its_emptied_store_is_listed_as_damaged(
) {
    let db = Db::new();
    let mut run = db.run_pipeline(2000, &["--yes"]).spawn();
    let thread = run.thread();
    // The pipeline's second step: its input and first step's checkpoints were flushed before.
    run.wait_for("draft #0 started");
    run.signal(libc::SIGKILL);
    run.finish();
    let folder = db.path().join("threads").join(&thread);
    assert!(
        !folder.join("new").exists(),
        "the mark outlived the thread's first flushed checkpoints"
    );
    // Listed (`row` fails the test otherwise), at the checkpoint it was killed after.
    assert_ne!(db.row(&thread)["status"], "damaged");

    // Emptied by damage (as in faults.rs): never written is no longer what it looks like.
    let _ = std::fs::remove_file(folder.join("index.json"));
    std::fs::write(db.store_dir(&thread).join("db"), b"").unwrap();
    assert_eq!(db.row(&thread)["status"], "damaged");
    db.graph(&["state", &thread])
        .expect(1)
        .stderr_has(&["is damaged", "store/db"]);
}
