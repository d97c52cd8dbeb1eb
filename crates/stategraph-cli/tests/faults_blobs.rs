//! Damaged blob files, end to end with the real binary: sled (0.34) keeps a value over a quarter
//! of a segment (a large checkpoint, pending writes, a recorded call) in a file of its own, and
//! its recovery reads the log only up to one that fails its checksum, dropping it and all after
//! it. A store must report such a file as damage, never read as a shorter store, and a read must
//! not write. The folder layout's indexed case is in `faults.rs`; here: a single sled store
//! (`--db` of a store a program wrote with `SledCheckpointer::open`), a thread indexed before
//! indexes named their blobs, and a blob a killed writer left cut short (not damage).

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/store_files.rs"]
mod store_files;

use harness::{Db, TestCommand};
use std::path::Path;
use std::sync::Arc;
use store_files::{assert_unchanged, blob_files, files_of, flip_a_bit};

/// A topic that makes every snapshot of the pipeline's state larger than a quarter of a 64 KiB
/// segment (and smaller than the 256 KiB from which snapshots are kept in pieces): sled writes
/// each to a blob file.
fn large_topic() -> String {
    "a long topic ".repeat(2_000)
}

/// Runs the pipeline to its end in this process, as a user's own program would.
fn run_pipeline_in_process(
    store: Arc<dyn stategraph::checkpoint::Checkpointer>,
    thread: &str,
    topic: &str,
) {
    use stategraph::runtime::RunConfig;
    let graph = stategraph_agents::pipeline::graph()
        .compile()
        .unwrap()
        .with_checkpointer(store);
    let input = stategraph_agents::pipeline::DocUpdate::default().topic(topic.to_string());
    let config = RunConfig::new()
        .thread(thread)
        .setting("step_ms", 1)
        .setting("yes", true)
        .setting("sections", serde_json::json!(["One", "Two"]));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(graph.invoke(input, config)).unwrap();
}

/// `graph --db <store> <args>`.
fn graph(store: &Path, args: &[&str]) -> TestCommand {
    let mut all = vec!["--db", store.to_str().unwrap()];
    all.extend_from_slice(args);
    TestCommand::bare(&all)
}

#[test]
fn a_damaged_blob_file_of_a_single_store_is_reported_not_read_as_a_shorter_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = Arc::new(stategraph_sled::SledCheckpointer::open(path).unwrap());
    run_pipeline_in_process(store.clone(), "small", "sled");
    run_pipeline_in_process(store.clone(), "large", &large_topic());
    drop(store);
    let blobs = blob_files(path);
    assert!(
        !blobs.is_empty(),
        "the large snapshots went into blob files"
    );
    let listed = graph(path, &["threads", "--json"]).expect(0).json();
    assert_eq!(
        statuses(&listed),
        [("large", "done"), ("small", "done")],
        "{listed}"
    );

    // What a writer killed while writing a blob leaves: a cut file past the end of the log,
    // which no record names. Not damage (sled rightly removes it when the store is next opened).
    std::fs::write(path.join("blobs").join("900000000"), b"cut sh").unwrap();
    let listed = graph(path, &["threads", "--json"]).expect(0).json();
    assert_eq!(
        statuses(&listed),
        [("large", "done"), ("small", "done")],
        "{listed}"
    );

    for blob in &blobs {
        flip_a_bit(blob);
    }
    let damaged = files_of(path);
    let listed = graph(path, &["threads", "--json"]).expect(0).json();
    // `large` was written after the damaged file: sled reads none of it, and it is listed, not
    // dropped. `small` reads, but what was written after the file is lost to every thread.
    assert_eq!(
        statuses(&listed),
        [("small", "damaged"), ("large", "damaged")],
        "{listed}"
    );
    for row in listed.as_array().unwrap() {
        let file = row["damage"]["file"].as_str().unwrap();
        assert!(
            blobs.iter().any(|b| b.display().to_string() == file),
            "names {file}, not a blob file"
        );
        let reason = row["damage"]["reason"].as_str().unwrap();
        assert!(reason.contains("fails its checksum"), "{reason}");
    }
    let lost = &listed[1]["damage"];
    assert_eq!(lost["lost_checkpoints"], true, "{listed}");
    let reason = lost["reason"].as_str().unwrap();
    assert!(
        reason.contains("every checkpoint of this thread"),
        "{reason}"
    );
    graph(path, &["threads"])
        .expect(0)
        .stderr_has(&["copy the directory aside", "SledCheckpointer::open"]);

    // What is intact reads, with a warning naming the file; a thread that does not read is
    // damaged, never missing.
    graph(path, &["state", "small"])
        .expect(0)
        .stderr_has(&["warning", "is damaged", "blobs/"]);
    for read in ["state", "history"] {
        let out = graph(path, &[read, "large"]).expect(1);
        out.stderr_has(&["is damaged", "blobs/", "every checkpoint of this thread"]);
        assert!(!out.stderr.contains("no thread"), "{out}");
    }
    graph(path, &["resume", "small"])
        .expect(1)
        .stderr_has(&["single sled store"]);
    graph(path, &["repair", "large"]).expect(1).stderr_has(&[
        "is damaged",
        "blobs/",
        "copy the directory aside",
    ]);
    assert_unchanged(&damaged, &files_of(path));
}

/// Each listed thread's id and status, in the listing's order.
fn statuses(listed: &serde_json::Value) -> Vec<(&str, &str)> {
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["thread_id"].as_str().unwrap(),
                t["status"].as_str().unwrap(),
            )
        })
        .collect()
}

/// Makes the thread's index look as one written before indexes named the store's blob files.
fn forget_indexed_blobs(db: &Db, thread: &str) {
    let index = db.store_dir(thread).with_file_name("index.json");
    let mut entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert!(
        entry["blobs"].as_array().is_some_and(|b| !b.is_empty()),
        "{entry}"
    );
    entry.as_object_mut().unwrap().remove("blobs");
    std::fs::write(&index, serde_json::to_vec_pretty(&entry).unwrap()).unwrap();
}

#[test]
fn a_damaged_blob_of_a_thread_indexed_before_blobs_were_named_is_found_by_reading_and_writing() {
    let db = Db::new();
    let topic = large_topic();
    let args = [
        "run",
        "pipeline",
        "--input",
        &topic,
        "--yes",
        "--set",
        "step_ms=1",
    ];
    let flipped = db.graph(&args).expect(0).thread();
    let rotted = db.graph(&args).expect(0).thread();
    for thread in [&flipped, &rotted] {
        forget_indexed_blobs(&db, thread);
    }
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "done"),
        "{listed}"
    );

    // The newest blob (by log position; what was written before it still reads) with a byte
    // changed by a program: the store's fingerprint no longer matches its index, so it is read
    // from a copy, whose blobs are checked.
    let newest = |thread: &str| {
        let mut blobs = blob_files(&db.store_dir(thread));
        blobs.sort_by_key(|b| {
            b.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        });
        blobs
            .pop()
            .expect("the large snapshots went into blob files")
    };
    let blob = newest(&flipped);
    flip_a_bit(&blob);
    // A bit lost by the disk: the file's size and time stay, the index still matches.
    let rotted_blob = newest(&rotted);
    let modified = std::fs::metadata(&rotted_blob).unwrap().modified().unwrap();
    flip_a_bit(&rotted_blob);
    let file = std::fs::File::options()
        .write(true)
        .open(&rotted_blob)
        .unwrap();
    file.set_modified(modified).unwrap();
    drop(file);
    let damaged = files_of(db.path());

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == flipped.as_str())
        .unwrap();
    assert_eq!(row["status"], "damaged", "{listed}");
    let file = row["damage"]["file"].as_str().unwrap();
    assert_eq!(file, blob.display().to_string(), "{listed}");
    for thread in [&flipped, &rotted] {
        db.graph(&["state", thread])
            .expect(0)
            .stderr_has(&["warning", "is damaged", "blobs/"]);
        // Opening the store to write would drop the blob and all after it for good.
        db.graph(&["resume", thread]).expect(1).stderr_has(&[
            "is damaged",
            "blobs/",
            "graph repair",
        ]);
    }
    assert_unchanged(&damaged, &files_of(db.path()));

    // The repair names what it dropped, found without the index's help.
    let repaired = db.graph(&["repair", &flipped, "--json"]).expect(0).json();
    assert_eq!(repaired["damaged_blob"], file, "{repaired}");
}

/// The store's blob files, in the order they were written (sled names each by its log offset).
fn blobs_in_order(store: &Path) -> Vec<std::path::PathBuf> {
    let mut blobs = blob_files(store);
    blobs.sort_by_key(|b| {
        b.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    blobs
}

/// Copies a folder (a whole store) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        match entry.file_type().unwrap().is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => drop(std::fs::copy(entry.path(), &target).unwrap()),
        }
    }
}

#[test]
fn no_damaged_blob_file_makes_a_reading_command_crash() {
    let db = Db::new();
    let thread = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            &large_topic(),
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0)
        .thread();
    let count = blobs_in_order(&db.store_dir(&thread)).len();
    assert!(count > 3, "{count} blob files");
    // Each blob file damaged in turn, in a copy of the store: sled 0.34's recovery panics on
    // some (writing a snapshot of pages the damaged file left unread); every read reports
    // damage or reads what is intact, and never crashes.
    for k in 0..count {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(db.path(), copy.path());
        let store = copy.path().join("threads").join(&thread).join("store");
        flip_a_bit(&blobs_in_order(&store)[k]);
        let db_flag = copy.path().display().to_string();
        for args in [
            vec!["threads"],
            vec!["state", thread.as_str()],
            vec!["history", thread.as_str()],
        ] {
            let mut words = args.clone();
            words.extend(["--db", db_flag.as_str()]);
            let out = TestCommand::bare(&words).output();
            assert!(
                matches!(out.code, Some(0) | Some(1)),
                "blob {k} of {count}: {out}"
            );
            assert!(
                !out.stderr.contains("panicked"),
                "blob {k} of {count}: {out}"
            );
        }
    }
}

#[test]
fn a_damaged_blob_that_cost_a_thread_its_newest_checkpoints_is_not_read_as_its_newest() {
    let db = Db::new();
    let topic = large_topic();
    let thread = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            &topic,
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0)
        .thread();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let steps = history.as_array().unwrap().len();
    // One run wrote the whole store, so sled reads every blob at opening and stops at the first
    // that fails: the third one written (the first two hold the thread's input and outline
    // checkpoints; the third, a section's child graph's, comes after them).
    let blobs = blobs_in_order(&db.store_dir(&thread));
    assert!(blobs.len() > 3, "{blobs:?}");
    flip_a_bit(&blobs[2]);
    let damaged = files_of(db.path());

    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    assert_eq!(listed[0]["damage"]["lost_checkpoints"], true, "{listed}");
    assert_eq!(listed[0]["damage"]["file"], blobs[2].display().to_string());
    // An older checkpoint is not the thread's newest: reading the newest fails naming the
    // file; the checkpoints that are intact are listed.
    db.graph(&["state", &thread])
        .expect(1)
        .stderr_has(&["is damaged", "blobs/", "graph history"]);
    let intact = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let intact = intact.as_array().unwrap().len();
    assert!(0 < intact && intact < steps, "{intact} of {steps}");
    assert_unchanged(&damaged, &files_of(db.path()));
}
