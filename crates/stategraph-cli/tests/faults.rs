//! Faults, end to end with the real binary: damaged stores, killed commands, races, bad input.
//! Each test says which promise of the store it checks; the full disk is in `faults_disk.rs`,
//! kills at an exact point of a run in `app/faults_kill.rs`.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/store_files.rs"]
mod store_files;

use harness::Db;
use std::collections::BTreeMap;
use std::path::Path;
use store_files::{assert_unchanged, files_of};

#[test]
fn reading_threads_never_writes_a_byte_even_a_store_left_by_a_killed_run() {
    let db = Db::new();
    let finished = db.finished_thread();
    // A run killed mid-step leaves a store sled has to recover: opening it would write.
    let mut run = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--set",
            "step_ms=2000",
        ])
        .spawn();
    let killed = run.thread();
    run.wait_for("draft #0 started");
    run.signal(libc::SIGKILL);
    run.finish();

    let before = files_of(db.path());
    for thread in [&finished, &killed] {
        db.graph(&["state", thread]).expect(0);
        db.graph(&["state", thread, "--json"]).expect(0);
        db.graph(&["history", thread]).expect(0);
    }
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    assert_unchanged(&before, &files_of(db.path()));
}

#[test]
fn a_thread_id_of_any_allowed_length_is_read_from_a_second_terminal_while_it_runs() {
    let db = Db::new();
    let long = "t".repeat(200);
    let mut run = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--thread",
            &long,
            "--set",
            "step_ms=1500",
        ])
        .spawn();
    run.wait_for("draft #0 started");
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], long.as_str());
    assert_eq!(listed[0]["status"], "running", "{listed}");
    assert_eq!(listed[0]["step"], 1, "the step it is on, asked of the run");
    let state = db.graph(&["state", &long, "--json"]).expect(0).json();
    assert_eq!(state["status"], "running");
    db.graph(&["resume", &long])
        .expect(1)
        .stderr_has(&["is busy"]);
    run.signal(libc::SIGINT);
    assert_eq!(run.finish().code, Some(130));
}

#[test]
fn a_store_that_lost_its_end_is_listed_damaged_refused_for_writing_and_repaired_explicitly() {
    let db = Db::new();
    let thread = db.paused_thread();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let steps = history.as_array().unwrap().len();
    // What a store read back shorter looks like: its newest checkpoints are gone, while the
    // index, written when the run let go, saw them.
    {
        use stategraph::checkpoint::Checkpointer;
        use stategraph_sled::{SledCheckpointer, SledOptions};
        let store =
            SledCheckpointer::open_with(db.store_dir(&thread), SledOptions::small()).unwrap();
        let newest: Vec<_> = history.as_array().unwrap()[..2]
            .iter()
            .map(|h| h["checkpoint_id"].as_str().unwrap().parse().unwrap())
            .collect();
        futures::executor::block_on(store.delete_checkpoints(&thread, &newest)).unwrap();
    }
    let store_files = files_of(&db.store_dir(&thread));

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    let reason = listed[0]["damage"]["reason"].as_str().unwrap();
    assert!(reason.contains("when it was last closed"), "{reason}");
    assert!(
        listed[0]["damage"]["file"]
            .as_str()
            .unwrap()
            .ends_with("store/db"),
        "{listed}"
    );
    // What is left still reads; nothing is written to or repaired by reading.
    db.graph(&["history", &thread, "--json"]).expect(0);
    db.graph(&["resume", &thread, "--resume", "yes"])
        .expect(1)
        .stderr_has(&["is damaged", "graph repair"]);
    assert_unchanged(&store_files, &files_of(&db.store_dir(&thread)));

    let repaired = db.graph(&["repair", &thread, "--json"]).expect(0).json();
    let backup = repaired["backup"].as_str().unwrap();
    assert_unchanged(&store_files, &files_of(&Path::new(backup).join("store")));
    assert_eq!(repaired["lost_from_step"], history[0]["step"]);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_ne!(listed[0]["status"], "damaged", "{listed}");
    assert!(steps > 2);
}

/// A damage done to a closed store's files.
struct Damage {
    name: &'static str,
    apply: fn(&Path),
    /// The file the listing must name.
    file: &'static str,
    /// Whether the newest checkpoints are gone (rather than only sled's bookkeeping damaged).
    loses_checkpoints: bool,
}

fn flip_a_bit_in_the_middle_of_the_log(store: &Path) {
    let path = store.join("db");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
}

fn truncate_the_log(store: &Path) {
    let path = store.join("db");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
}

fn leave_a_stray_snapshot(store: &Path) {
    std::fs::write(
        store.join("snap.00000000000FFFFF"),
        b"not a snapshot at all",
    )
    .unwrap();
}

fn flip_a_bit_in_the_configuration(store: &Path) {
    let path = store.join("conf");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
}

const DAMAGES: &[Damage] = &[
    Damage {
        name: "a flipped bit in the log",
        apply: flip_a_bit_in_the_middle_of_the_log,
        file: "store/db",
        loses_checkpoints: true,
    },
    Damage {
        name: "a truncated log",
        apply: truncate_the_log,
        file: "store/db",
        loses_checkpoints: true,
    },
    Damage {
        name: "a leftover snap.* file",
        apply: leave_a_stray_snapshot,
        file: "store/snap.00000000000FFFFF",
        loses_checkpoints: false,
    },
    Damage {
        name: "a flipped bit in sled's configuration",
        apply: flip_a_bit_in_the_configuration,
        file: "store/conf",
        loses_checkpoints: false,
    },
];

#[test]
fn a_store_emptied_by_damage_without_its_index_is_still_listed_as_damaged() {
    let db = Db::new();
    let thread = db.finished_thread();
    std::fs::remove_file(db.path().join("threads").join(&thread).join("index.json")).unwrap();
    std::fs::write(db.store_dir(&thread).join("db"), b"").unwrap();
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed}");
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    db.graph(&["state", &thread])
        .expect(1)
        .stderr_has(&["is damaged", "store/db"]);
}

#[test]
fn a_damaged_store_never_vanishes_or_rolls_back_in_silence_and_reads_never_repair_it() {
    for damage in DAMAGES {
        let db = Db::new();
        let thread = db.finished_thread();
        let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
        let oldest = history.as_array().unwrap().last().unwrap()["checkpoint_id"]
            .as_str()
            .unwrap()
            .to_string();
        (damage.apply)(&db.store_dir(&thread));
        let damaged = files_of(db.path());
        let context = format!("after {}", damage.name);

        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_eq!(
            listed[0]["thread_id"],
            thread.as_str(),
            "{context}: {listed}"
        );
        assert_eq!(listed[0]["status"], "damaged", "{context}: {listed}");
        let file = listed[0]["damage"]["file"].as_str().unwrap();
        assert!(file.ends_with(damage.file), "{context}: names {file}");
        assert!(
            db.graph(&["threads"])
                .expect(0)
                .stdout
                .contains("damaged: "),
            "{context}: the table says what is wrong"
        );

        let state = db.graph(&["state", &thread]).output();
        if damage.loses_checkpoints {
            assert_eq!(state.code, Some(1), "{context}: {state}");
            state.stderr_has(&[&thread, damage.file, "is damaged", "graph repair"]);
        } else {
            assert_eq!(state.code, Some(0), "{context}: {state}");
            state.stderr_has(&["warning", &thread, damage.file]);
        }
        // What is intact still reads: the input checkpoint, at least, is before the damage.
        db.graph(&["state", &thread, "--checkpoint", &oldest])
            .expect(0);
        db.graph(&["history", &thread]).expect(0);
        // Writing is refused until a person repairs it.
        db.graph(&["resume", &thread])
            .expect(1)
            .stderr_has(&["is damaged", "graph repair"]);
        assert_unchanged(&damaged, &files_of(db.path()));

        let repaired = db.graph(&["repair", &thread, "--json"]).expect(0).json();
        let backup = Path::new(repaired["backup"].as_str().unwrap());
        let backed_up = files_of(&backup.join("store"));
        let before: BTreeMap<_, _> = damaged
            .into_iter()
            .filter_map(|(name, bytes)| {
                let prefix = format!("threads/{thread}/store/");
                name.strip_prefix(&prefix).map(|n| (n.to_string(), bytes))
            })
            .collect();
        assert_unchanged(&before, &backed_up);
        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_ne!(listed[0]["status"], "damaged", "{context}: {listed}");
        // It continues from its newest intact checkpoint and finishes.
        let resumed = db.graph(&["resume", &thread]).output();
        assert!(
            resumed.code == Some(0) || resumed.code == Some(3),
            "{context}: {resumed}"
        );
    }
}

/// Either the thread is whole (listed, readable) or wholly gone (no folder, not listed).
fn assert_whole_or_gone(db: &Db, thread: &str) -> bool {
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    let in_list = listed
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["thread_id"] == thread);
    let folder = db.path().join("threads").join(thread);
    if in_list {
        assert_ne!(listed[0]["status"], "damaged", "{listed}");
        db.graph(&["state", thread]).expect(0);
        db.graph(&["history", thread]).expect(0);
    } else {
        assert!(!folder.exists(), "a folder is left for a thread not listed");
        db.graph(&["state", thread]).expect(2);
    }
    let leftovers: Vec<_> = std::fs::read_dir(db.path().join("threads"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".deleted-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    in_list
}

#[test]
fn delete_racing_resume_leaves_the_thread_whole_or_wholly_gone() {
    let mut outcomes = std::collections::BTreeSet::new();
    for round in 0..8 {
        let db = Db::new();
        let thread = db.paused_thread();
        let mut resume = db
            .graph(&["resume", &thread, "--resume", "yes", "--set", "step_ms=50"])
            .spawn();
        match round % 3 {
            // The resume holds the thread: the delete must be refused.
            0 => resume.wait_for("thread "),
            1 => std::thread::sleep(std::time::Duration::from_millis(3 * round)),
            _ => {}
        }
        let delete = db.graph(&["delete", &thread]).output();
        let resume = resume.finish();
        assert!(
            matches!(delete.code, Some(0) | Some(1)),
            "{delete}\n{resume}"
        );
        assert!(
            matches!(resume.code, Some(0) | Some(1) | Some(2)),
            "{resume}\n{delete}"
        );
        let kept = assert_whole_or_gone(&db, &thread);
        assert_eq!(kept, delete.code != Some(0), "{delete}\n{resume}");
        outcomes.insert(kept);
    }
    assert!(outcomes.contains(&true), "a held thread was never kept");
}

#[test]
fn a_delete_cut_short_leaves_nothing_behind_after_the_next_command() {
    let db = Db::new();
    let thread = db.finished_thread();
    let other = db.finished_thread();
    // What a delete killed after its rename leaves: the folder under a dot-name of its process.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let trash = db
        .path()
        .join("threads")
        .join(format!(".deleted-{thread}-{dead}-0000abcd"));
    std::fs::rename(db.path().join("threads").join(&thread), &trash).unwrap();

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["thread_id"], other.as_str());
    assert!(
        !trash.exists(),
        "the next command removes what the delete left"
    );
    assert_whole_or_gone(&db, &thread);
}

#[test]
fn a_thread_killed_before_its_first_checkpoint_is_nowhere() {
    // What a run killed between creating its thread and saving the input checkpoint leaves:
    // a folder whose store holds how it was started and nothing else.
    let db = Db::new();
    let thread = "half-made";
    {
        use stategraph::checkpoint::Checkpointer;
        use stategraph_sled::FolderCheckpointer;
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let store = FolderCheckpointer::open(db.path()).unwrap();
            store.create(thread).await.unwrap();
            let origin = serde_json::json!({"graph": "pipeline", "graph_file": "pipeline",
                "overrides": [], "created_at_ms": 1});
            store
                .put_journal(thread, "graph/origin", &origin)
                .await
                .unwrap();
            store.close();
        });
    }
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed, serde_json::json!([]));
    db.graph(&["state", thread])
        .expect(2)
        .stderr_has(&["no thread"]);
    db.graph(&["resume", thread])
        .expect(2)
        .stderr_has(&["no thread"]);
    db.graph(&["history", thread]).expect(2);
    // The id can be used for a new run.
    db.graph(&[
        "run",
        "pipeline",
        "--input",
        "x",
        "--yes",
        "--thread",
        thread,
        "--set",
        "step_ms=1",
    ])
    .expect(0);
}

/// Runs the pipeline to its end in this process, as a user's own program would, on `store`.
fn run_pipeline_in_process(
    store: std::sync::Arc<dyn stategraph::checkpoint::Checkpointer>,
    thread: &str,
) {
    use stategraph::runtime::RunConfig;
    let graph = stategraph_agents::pipeline::graph()
        .compile()
        .unwrap()
        .with_checkpointer(store);
    let input = stategraph_agents::pipeline::DocUpdate::default().topic("sled".to_string());
    let config = RunConfig::new()
        .thread(thread)
        .setting("step_ms", 1)
        .setting("yes", true)
        .setting("sections", serde_json::json!(["One", "Two"]));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(graph.invoke(input, config)).unwrap();
}

#[test]
fn threads_a_program_stored_with_the_library_are_listed_and_read_by_graph() {
    // With the layout graph keeps: by construction, everything works, writing included.
    let db = Db::new();
    let store = std::sync::Arc::new(stategraph_sled::FolderCheckpointer::open(db.path()).unwrap());
    run_pipeline_in_process(store.clone(), "from-my-program");
    store.close();
    drop(store);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], "from-my-program");
    assert_eq!(listed[0]["status"], "done");
    let state = db
        .graph(&["state", "from-my-program", "--json"])
        .expect(0)
        .json();
    assert_eq!(state["values"]["topic"], "sled");
    let history = db
        .graph(&["history", "from-my-program", "--json"])
        .expect(0)
        .json();
    let first = history.as_array().unwrap().last().unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    db.graph(&[
        "fork",
        "from-my-program",
        "--checkpoint",
        &first,
        "--to",
        "copy",
    ])
    .expect(0);
    db.graph(&["resume", "copy", "--yes"]).expect(0);

    // With one sled store of many threads (SledCheckpointer::open): listed and read, not written.
    let single = tempfile::tempdir().unwrap();
    let store =
        std::sync::Arc::new(stategraph_sled::SledCheckpointer::open(single.path()).unwrap());
    run_pipeline_in_process(store.clone(), "first");
    run_pipeline_in_process(store.clone(), "second");
    drop(store);
    let path = single.path().to_str().unwrap();
    let before = files_of(single.path());
    let listed = harness::TestCommand::bare(&["--db", path, "threads", "--json"])
        .expect(0)
        .json();
    let ids: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    // Newest first.
    assert_eq!(ids, ["second", "first"], "{listed}");
    assert_eq!(listed[0]["status"], "done");
    let state = harness::TestCommand::bare(&["--db", path, "state", "second", "--json"])
        .expect(0)
        .json();
    assert_eq!(
        state["values"]["outline"],
        serde_json::json!(["One", "Two"])
    );
    harness::TestCommand::bare(&["--db", path, "history", "first"]).expect(0);
    assert_unchanged(&before, &files_of(single.path()));
    harness::TestCommand::bare(&["--db", path, "resume", "first"])
        .expect(1)
        .stderr_has(&["single sled store", "FolderCheckpointer::open"]);
    assert_unchanged(&before, &files_of(single.path()));
}

/// Runs `f` on the library's view of the store in `db`, as a user's own program would.
fn with_store<T>(db: &Db, f: impl AsyncFnOnce(&stategraph_sled::FolderCheckpointer) -> T) -> T {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = stategraph_sled::FolderCheckpointer::open(db.path()).unwrap();
        let out = f(&store).await;
        store.close();
        out
    })
}

#[test]
fn an_unreadable_record_of_how_a_thread_started_is_damage_never_read_as_missing() {
    use stategraph::checkpoint::Checkpointer;
    let db = Db::new();
    // A thread whose --set override its resume needs.
    let sections = r#"sections=["Only {topic}"]"#;
    let thread = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--set",
            "step_ms=1",
            "--set",
            sections,
        ])
        .expect(3)
        .thread();
    // Its record of how it started, replaced by one that reads as JSON but not as that record.
    with_store(&db, async |store| {
        let junk = serde_json::json!({"graph": 7, "overrides": "lost"});
        store
            .put_journal(&thread, "graph/origin", &junk)
            .await
            .unwrap();
    });
    let damaged = files_of(db.path());
    let said = [
        &format!("how thread `{thread}` was started"),
        "journal entry `graph/origin`",
        "cannot be read",
        &format!("graph repair {thread}"),
    ];
    // Changing it is refused; reading it warns, and shows what is intact.
    let commands: [&[&str]; 3] = [
        &["resume", &thread, "--resume", "yes"],
        &["update", &thread, "--set-json", r#"{"notes": "x"}"#],
        &["rerun", &thread, "--from", "outline"],
    ];
    for args in commands {
        db.graph(args).expect(1).stderr_has(&said);
    }
    let state = db.graph(&["state", &thread, "--json"]).expect(0);
    state.stderr_has(&["warning"]).stderr_has(&said);
    assert_eq!(state.json()["status"], "paused", "{state}");
    db.graph(&["history", &thread])
        .expect(0)
        .stderr_has(&["warning", "graph repair"]);
    assert_unchanged(&damaged, &files_of(db.path()));

    // The repair says what it lost; the thread goes on, its override given again.
    let repaired = db.graph(&["repair", &thread]).expect(0);
    repaired.stderr_has(&[
        "could not be read",
        "graph `pipeline` without --set overrides",
    ]);
    let done = db
        .graph(&["resume", &thread, "--resume", "yes", "--set", sections])
        .expect(0);
    assert!(done.stdout.contains("## Only sled"), "{done}");
}

#[test]
fn graph_threads_lists_a_thread_whose_record_of_how_it_started_does_not_read_as_damaged() {
    use stategraph::checkpoint::Checkpointer;
    let db = Db::new();
    let thread = db.finished_thread();
    with_store(&db, async |store| {
        let junk = serde_json::json!({"graph": 7, "overrides": "lost"});
        store
            .put_journal(&thread, "graph/origin", &junk)
            .await
            .unwrap();
    });
    let store = db.store_dir(&thread).display().to_string();
    let index = db.store_dir(&thread).with_file_name("index.json");
    // Listed from the index written when the store was let go, then (index gone) from the store.
    for from_index in [true, false] {
        if !from_index {
            std::fs::remove_file(&index).unwrap();
        }
        let damaged = files_of(db.path());
        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed}");
        assert_eq!(listed[0]["status"], "damaged", "{listed}");
        assert_eq!(listed[0]["damage"]["file"], store.as_str(), "{listed}");
        let reason = listed[0]["damage"]["reason"].as_str().unwrap();
        for said in ["how it was started", "journal entry `graph/origin`", &store] {
            assert!(reason.contains(said), "{reason} lacks {said}");
        }
        let table = db.graph(&["threads"]).expect(0);
        assert!(
            table
                .stdout
                .contains("damaged: its record of how it was started"),
            "{table}"
        );
        table.stderr_has(&["graph repair"]);
        assert_unchanged(&damaged, &files_of(db.path()));
    }
    // Repaired, it is listed as it stands again.
    db.graph(&["repair", &thread]).expect(0);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
}

#[test]
fn a_legacy_meta_json_that_does_not_read_lists_its_thread_as_damaged_though_indexed_before() {
    // A thread with no record in its journal, as an earlier layout left it: its meta.json says
    // how it started. The file is outside the store: its index must not hide that it broke.
    let db = Db::new();
    let store = std::sync::Arc::new(stategraph_sled::FolderCheckpointer::open(db.path()).unwrap());
    run_pipeline_in_process(store.clone(), "legacy");
    store.close();
    drop(store);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
    let meta = db.store_dir("legacy").with_file_name("meta.json");
    std::fs::write(&meta, "{\"graph\": \"pipel").unwrap();
    let damaged = files_of(db.path());
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    let file = meta.display().to_string();
    assert_eq!(listed[0]["damage"]["file"], file.as_str(), "{listed}");
    let reason = listed[0]["damage"]["reason"].as_str().unwrap();
    assert!(reason.contains("is not JSON"), "{reason}");
    assert_unchanged(&damaged, &files_of(db.path()));
}

#[test]
fn a_damaged_journal_blob_lists_its_thread_as_damaged_naming_the_file() {
    use stategraph::checkpoint::Checkpointer;
    let db = Db::new();
    let thread = db.finished_thread();
    // A recorded call's result (what Context::record keeps in the journal) large enough that
    // sled keeps it in a file of its own: over a quarter of a 64 KiB segment.
    let key = "0193/0/summary";
    with_store(&db, async |store| {
        let big = serde_json::json!("a long model answer ".repeat(2_000));
        store.put_journal(&thread, key, &big).await.unwrap();
    });
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
    let blobs: Vec<_> = std::fs::read_dir(db.store_dir(&thread).join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!blobs.is_empty(), "the value went into a blob file");
    for blob in &blobs {
        let mut bytes = std::fs::read(blob).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
        std::fs::write(blob, bytes).unwrap();
    }
    let damaged = files_of(db.path());

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed}");
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    let file = listed[0]["damage"]["file"].as_str().unwrap();
    assert!(
        blobs.iter().any(|b| b.display().to_string() == file),
        "names {file}, not a blob file"
    );
    let reason = listed[0]["damage"]["reason"].as_str().unwrap();
    assert!(reason.contains("checksum"), "{reason}");
    let table = db.graph(&["threads"]).expect(0);
    assert!(table.stdout.contains("damaged: "), "{table}");
    // What is intact still reads, with a warning naming the file; writing is refused (sled
    // would drop the blob and all after it for good); nothing is written by reading.
    db.graph(&["state", &thread])
        .expect(0)
        .stderr_has(&["warning", "blobs/"]);
    db.graph(&["history", &thread]).expect(0);
    db.graph(&["resume", &thread])
        .expect(1)
        .stderr_has(&["is damaged", "blobs/", "graph repair"]);
    assert_unchanged(&damaged, &files_of(db.path()));

    // The repair keeps the store as it was in a backup; the thread is then sound again.
    let repaired = db.graph(&["repair", &thread, "--json"]).expect(0).json();
    let backup = Path::new(repaired["backup"].as_str().unwrap());
    assert!(backup.join("store/blobs").exists(), "{repaired}");
    assert_eq!(repaired["damaged_blob"], file, "{repaired}");
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
    let read = with_store(&db, async |store| store.get_journal(&thread, key).await);
    assert!(matches!(read, Ok(None)), "{read:?}");
}

#[test]
fn repair_of_a_healthy_thread_says_so_and_changes_nothing() {
    let db = Db::new();
    let thread = db.finished_thread();
    let before = files_of(db.path());
    db.graph(&["repair", &thread]).expect(0).stderr_has(&[
        &thread,
        "is healthy",
        "nothing was changed, no backup was made",
    ]);
    let json = db.graph(&["repair", &thread, "--json"]).expect(0).json();
    assert_eq!(json["healthy"], true, "{json}");
    assert_eq!(json["backup"], serde_json::Value::Null, "{json}");
    assert!(!db.path().join("backups").exists(), "no backup folder");
    assert_unchanged(&before, &files_of(db.path()));
}

#[test]
fn repair_of_a_thread_with_nothing_left_says_it_is_gone_and_again_that_there_is_none() {
    let db = Db::new();
    let thread = db.finished_thread();
    std::fs::write(db.store_dir(&thread).join("db"), b"").unwrap();
    let repaired = db.graph(&["repair", &thread]).expect(0);
    repaired.stderr_has(&[&thread, "it is gone", "backups"]);
    assert!(
        !repaired.stderr.contains("delete it"),
        "nothing is left to delete\n{repaired}"
    );
    assert!(db.thread_ids().is_empty());
    assert!(!db.path().join("threads").join(&thread).exists());
    db.graph(&["repair", &thread])
        .expect(2)
        .stderr_has(&[&format!("no thread `{thread}`")]);
}
