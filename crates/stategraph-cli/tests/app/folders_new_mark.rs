//! The per-thread layout's mark of a thread never written (`threads/ID/new`,
//! `checkpoint/folders/layout.rs`), end to end with real processes: it goes as soon as the
//! thread's store holds a record on disk, so a thread whose store is later emptied by damage is
//! listed as damaged, never dropped as one that was never written.

use crate::harness;
use crate::own_binary;

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

#[test]
fn a_program_running_with_async_durability_killed_after_its_first_checkpoint_keeps_no_mark() {
    let db = Db::new();
    let folder = db.path().join("threads").join("async");
    let run = making(&db, "async", Made::RunningAsync);
    // Its first record is flushed as it is written, and the mark goes with it; without that
    // flush, sled's own (every 500 ms) puts it on disk with the mark still there.
    let start = std::time::Instant::now();
    while folder.join("new").exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the mark is still there a minute into an async run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    run.signal(libc::SIGKILL);
    run.finish();
    assert_ne!(db.row("async")["status"], "damaged");

    // Emptied by damage: listed as damaged, not dropped as a thread never written.
    let _ = std::fs::remove_file(folder.join("index.json"));
    std::fs::write(db.store_dir("async").join("db"), b"").unwrap();
    assert_eq!(db.row("async")["status"], "damaged");
}

/// Where `making_child` finds the store, the thread to make and how far to go (joined by
/// U+001F).
const CHILD_ENV: &str = "STATEGRAPH_NEW_MARK_CHILD";

/// How far `making_child` goes in making its thread before it waits to be killed.
#[derive(Clone, Copy)]
enum Made {
    /// Locked and marked new, sled not started yet: as `FolderCheckpointer` leaves a folder
    /// just before it opens the store (`checkpoint/folders/take.rs`, `open_held`).
    Marked,
    /// Made and held by `FolderCheckpointer::create`, as `graph run` does first: the store is
    /// open, nothing written in it.
    Held,
    /// Made by `FolderCheckpointer::create`, then a pipeline run on it in this process with
    /// async durability, as a program of the library's users runs one (no record flushed by
    /// the CLI first), each step taking minutes.
    RunningAsync,
}

#[test]
#[ignore = "a child process of the folders_new_mark tests, started by them"]
fn making_child() {
    let Some(spec) = own_binary::child_spec(CHILD_ENV) else {
        return;
    };
    let [db, thread, how] = &spec[..] else {
        panic!("db, thread and how: {spec:?}");
    };
    if how == "marked" {
        let lock = own_binary::hold_thread_lock(std::path::Path::new(db), thread);
        let folder = std::path::Path::new(db).join("threads").join(thread);
        std::fs::write(folder.join("new"), b"").expect("the mark");
        eprintln!("made {thread}");
        std::thread::sleep(std::time::Duration::from_secs(300));
        drop(lock);
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let store = stategraph_sled::FolderCheckpointer::open(db).expect("open the store");
        store.create(thread).await.expect("make the thread");
        eprintln!("made {thread}");
        if how == "running-async" {
            run_async(std::sync::Arc::new(store), thread).await;
        }
        tokio::time::sleep(std::time::Duration::from_secs(300)).await;
    });
}

/// The pipeline on `thread` with async durability, its first step taking minutes.
async fn run_async(store: std::sync::Arc<stategraph_sled::FolderCheckpointer>, thread: &str) {
    use stategraph::runtime::{Durability, RunConfig};
    let graph = stategraph_agents::pipeline::graph()
        .compile()
        .expect("the pipeline")
        .with_checkpointer(store);
    let input = stategraph_agents::pipeline::DocUpdate::default().topic("sled".to_string());
    let config = RunConfig::new()
        .thread(thread)
        .durability(Durability::Async)
        .setting("step_ms", 300_000)
        .setting("yes", true);
    let _ = graph.invoke(input, config).await;
}

/// This test binary running `making_child`: a process that makes `thread` in `db` as far as
/// `how` says, writing no record, and waits until it is killed.
fn making(db: &Db, thread: &str, how: Made) -> harness::Running {
    let exe = std::env::current_exe().expect("the test binary's path");
    let child = own_binary::child_test_args("folders_new_mark::making_child");
    let how = match how {
        Made::Marked => "marked",
        Made::Held => "held",
        Made::RunningAsync => "running-async",
    };
    let spec = own_binary::command_line(&[
        db.path().display().to_string(),
        thread.to_string(),
        how.to_string(),
    ]);
    let mut running = harness::TestCommand::program(&exe, &child, "folders_new_mark::making_child")
        .env(CHILD_ENV, spec)
        .spawn();
    running.wait_for(&format!("made {thread}"));
    running
}

#[test]
fn prune_removes_folders_left_by_processes_killed_before_their_first_record_never_one_being_made() {
    let db = Db::new();
    let kept = db.finished_thread();
    let threads = db.path().join("threads");
    let (marked, held) = (threads.join("marked"), threads.join("held"));
    let makers = [
        making(&db, "marked", Made::Marked),
        making(&db, "held", Made::Held),
    ];
    assert!(marked.join("new").exists() && !marked.join("store").exists());
    assert!(held.join("new").exists() && held.join("store").is_dir());

    // Their locks are held: each process is making its thread now, and is left alone.
    let pruned = db.graph(&["prune", "--json"]).expect(0).json();
    assert_eq!(pruned["never_written_folders_removed"], 0, "{pruned:#}");
    assert!(
        marked.join("new").exists(),
        "a folder being made was touched"
    );
    assert!(held.join("new").exists() && held.join("store").is_dir());

    for maker in makers {
        maker.signal(libc::SIGKILL);
        maker.finish();
    }
    assert_eq!(
        db.thread_ids(),
        [kept.as_str()],
        "a folder never written is no thread"
    );
    db.graph(&["prune"])
        .expect(0)
        .stderr_has(&["removed 2 folder(s) of threads never written"]);
    assert!(
        !marked.exists() && !held.exists(),
        "an abandoned folder is still there"
    );
    assert_eq!(db.thread_ids(), [kept.as_str()]);
    let again = db.graph(&["prune", "--json"]).expect(0).json();
    assert_eq!(again["never_written_folders_removed"], 0, "{again:#}");
    db.graph(&["state", &kept]).expect(0);
    // The id is free again.
    db.run_pipeline(1, &["--yes", "--thread", "held"]).expect(0);
}

#[test]
fn prune_keeps_a_thread_whose_mark_outlived_its_records_and_drops_the_mark() {
    let db = Db::new();
    let thread = db.finished_thread();
    let folder = db.path().join("threads").join(&thread);
    // As a run killed after its first checkpoints left it before the mark went with them.
    std::fs::write(folder.join("new"), b"").unwrap();
    let pruned = db.graph(&["prune", "--json"]).expect(0).json();
    assert_eq!(pruned["never_written_folders_removed"], 0, "{pruned:#}");
    assert!(folder.join("store").is_dir());
    assert!(
        !folder.join("new").exists(),
        "the stale mark is still there"
    );
    assert_eq!(db.thread_ids(), [thread.as_str()]);
    db.graph(&["state", &thread]).expect(0);
}

#[test]
fn prune_of_one_thread_leaves_the_folders_of_threads_never_written_alone() {
    let db = Db::new();
    let kept = db.finished_thread();
    let maker = making(&db, "abandoned", Made::Held);
    maker.signal(libc::SIGKILL);
    maker.finish();
    let abandoned = db.path().join("threads").join("abandoned");
    assert!(abandoned.join("new").exists() && abandoned.join("store").is_dir());

    // `--thread` names the one thread to touch: no other folder goes.
    let one = db
        .graph(&["prune", "--thread", &kept, "--json"])
        .expect(0)
        .json();
    assert_eq!(one["never_written_folders_removed"], 0, "{one:#}");
    assert!(
        abandoned.join("new").exists() && abandoned.join("store").is_dir(),
        "prune --thread removed a folder it was not given"
    );
    // Without it, the same folder goes: it was one to remove.
    let all = db.graph(&["prune", "--json"]).expect(0).json();
    assert_eq!(all["never_written_folders_removed"], 1, "{all:#}");
    assert!(!abandoned.exists());
    assert_eq!(db.thread_ids(), [kept.as_str()]);
}
