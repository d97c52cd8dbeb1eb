//! Faults, end to end with the real binary: damaged stores, killed commands, races, bad input.
//! Each test says which promise of the store it checks; the full disk is in `faults_disk.rs`.

#[path = "support/cli.rs"]
mod harness;

use harness::Db;
use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir` with its bytes.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(before), names(after), "files appeared or vanished");
    for (name, bytes) in before {
        assert!(after[name] == *bytes, "{name} changed");
    }
}

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
        use stategraph::checkpoint::{Checkpointer, SledCheckpointer, SledOptions};
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
