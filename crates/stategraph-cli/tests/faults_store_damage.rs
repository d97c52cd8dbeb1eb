//! Damage the thread's index cannot witness. The store of a run killed with SIGKILL, damaged
//! afterwards: the run never let its thread go, so no index was written, and a log read back
//! shorter must still be told from the thread's real history (its flush witness,
//! `flushed.json`, says what the last finished flush made durable); and the other way round, a
//! kill alone is never taken for damage. sled's configuration file with a flipped byte: repaired
//! by writing it again, named as the store's own file, never as a reader's temporary copy.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/store_files.rs"]
mod store_files;

use harness::Db;
use std::path::Path;
use store_files::{assert_unchanged, files_of};

/// A pipeline run (outline, draft, review, publish) SIGKILLed while it runs step 4, after the
/// checkpoint of step 3 was saved: its thread holds steps 0 to 3 and has no index.
fn killed_at_step_4(db: &Db) -> String {
    let mut run = db.run_pipeline(1000, &["--yes"]).spawn();
    let thread = run.thread();
    run.wait_for("step 4: publish started");
    run.signal(libc::SIGKILL);
    run.finish();
    let folder = db.path().join("threads").join(&thread);
    assert!(
        !folder.join("index.json").exists(),
        "a killed run writes no index"
    );
    thread
}

fn truncate_the_log_to_two_thirds(store: &Path) {
    let path = store.join("db");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len * 2 / 3)
        .unwrap();
}

fn flip_a_byte_two_thirds_in(store: &Path) {
    let path = store.join("db");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() * 2 / 3;
    bytes[at] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
}

/// A damage done to a store's files.
type Damage = fn(&Path);

#[test]
fn a_killed_runs_store_read_back_shorter_is_damage_naming_the_lost_steps_never_a_rollback() {
    let damages: [(&str, Damage); 2] = [
        ("a truncated log", truncate_the_log_to_two_thirds),
        ("a flipped byte in the log", flip_a_byte_two_thirds_in),
    ];
    for (name, damage) in damages {
        let db = Db::new();
        let thread = killed_at_step_4(&db);
        let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
        assert_eq!(history[0]["step"], 3, "{name}: {history}");
        damage(&db.store_dir(&thread));
        let damaged = files_of(db.path());

        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_eq!(listed[0]["status"], "damaged", "{name}: {listed}");
        let reason = listed[0]["damage"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("it held step 3") && reason.contains("when its last flush finished"),
            "{name}: {reason}"
        );
        assert!(
            reason.contains("to 3"),
            "{name}: names the lost steps: {reason}"
        );
        let file = listed[0]["damage"]["file"].as_str().unwrap();
        assert!(file.ends_with("store/db"), "{name}: {file}");

        // The newest is not known: `state` fails; what is intact reads, with a warning.
        db.graph(&["state", &thread]).expect(1).stderr_has(&[
            "is damaged",
            "it held step 3",
            "graph repair",
        ]);
        let read = db.graph(&["history", &thread]).output();
        if read.code == Some(0) {
            read.stderr_has(&["warning", "is damaged", "it held step 3"]);
        }
        db.graph(&["resume", &thread])
            .expect(1)
            .stderr_has(&["is damaged", "graph repair"]);
        // Reading and a refused resume wrote nothing.
        assert_unchanged(&damaged, &files_of(db.path()));

        let repaired = db.graph(&["repair", &thread, "--json"]).expect(0).json();
        assert_eq!(repaired["healthy"], false, "{name}: {repaired}");
        assert_eq!(repaired["lost_from_step"], 3, "{name}: {repaired}");
        if repaired["gone"] == true {
            // Everything was after the damage: nothing to resume.
            continue;
        }
        let kept = repaired["now"]["step"].as_u64().unwrap();
        assert!(kept < 3, "{name}: {repaired}");
        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_ne!(listed[0]["status"], "damaged", "{name}: {listed}");
        // It continues from what was kept: the steps kept are not run again.
        let resumed = db.graph(&["resume", &thread]).expect(0);
        if kept >= 1 {
            assert!(
                !resumed.stderr.contains("outline started"),
                "{name}: the kept outline ran again\n{}",
                resumed.stderr
            );
        }
        let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
        assert_eq!(history[0]["step"], 4, "{name}: {history}");
    }
}

#[test]
fn repair_of_a_killed_runs_damaged_store_says_which_steps_it_dropped() {
    let db = Db::new();
    let thread = killed_at_step_4(&db);
    truncate_the_log_to_two_thirds(&db.store_dir(&thread));
    let out = db.graph(&["repair", &thread]).expect(0);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("repaired thread"), "{text}");
    assert!(
        text.contains("dropped what its store lost: step") && text.contains("reached step 3"),
        "{text}"
    );
}

#[test]
fn runs_killed_at_any_moment_are_never_taken_for_damaged() {
    let db = Db::new();
    // Kills at moments spread over a run's steps (each 40 ms): mid-step, mid-flush, between a
    // flush and its witness. What a kill leaves is a shorter history, never a false alarm.
    for delay_ms in [60u64, 95, 130, 170, 210, 250] {
        let mut run = db.run_pipeline(40, &["--yes"]).spawn();
        run.wait_for("step 0:");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        run.signal(libc::SIGKILL);
        run.finish();
    }
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    for row in listed.as_array().unwrap() {
        assert_ne!(row["status"], "damaged", "{listed}");
        let thread = row["thread_id"].as_str().unwrap();
        db.graph(&["state", thread]).expect(0);
        let resumed = db.graph(&["resume", thread]).output();
        assert!(
            resumed.code == Some(0) || resumed.code == Some(2),
            "{resumed}"
        );
    }
}

#[test]
fn a_flipped_version_digit_in_sleds_conf_is_named_and_repaired_by_rebuilding_the_file() {
    let db = Db::new();
    let thread = db.finished_thread();
    let conf = db.store_dir(&thread).join("conf");
    let written = std::fs::read(&conf).unwrap();
    // `version: 0.34`: the pagecache version's major digit (offset ~52), 0 -> 1.
    let at = String::from_utf8_lossy(&written).find("0.34").unwrap();
    let mut damaged = written.clone();
    damaged[at] ^= 0x01;
    std::fs::write(&conf, &damaged).unwrap();
    let no_temp_copy = |out: &harness::Output| {
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(
            !text.contains("stategraph-read-"),
            "names a temporary copy: {text}"
        );
        assert!(!text.contains("pagecache version"), "{text}");
    };

    let listed = db.graph(&["threads", "--json"]).expect(0);
    no_temp_copy(&listed);
    let listed = listed.json();
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    assert!(
        listed[0]["damage"]["file"]
            .as_str()
            .unwrap()
            .ends_with("store/conf"),
        "{listed}"
    );
    // Only sled's bookkeeping is damaged: every checkpoint reads, with a warning.
    let state = db.graph(&["state", &thread]).expect(0);
    state.stderr_has(&["warning", "store/conf"]);
    no_temp_copy(&state);
    no_temp_copy(
        db.graph(&["history", &thread])
            .expect(0)
            .stderr_has(&["store/conf"]),
    );
    let resume = db.graph(&["resume", &thread]).expect(1);
    resume.stderr_has(&["is damaged", "store/conf", "graph repair"]);
    no_temp_copy(&resume);

    let repaired = db.graph(&["repair", &thread]).expect(0);
    no_temp_copy(&repaired);
    repaired.stderr_has(&["rebuilt", "conf"]);
    assert_eq!(
        std::fs::read(&conf).unwrap(),
        written,
        "conf as sled wrote it"
    );
    let backups = || {
        std::fs::read_dir(db.path().join("backups"))
            .unwrap()
            .count()
    };
    assert_eq!(backups(), 1);
    // Repaired once: a second repair finds nothing to do and adds no backup.
    db.graph(&["repair", &thread])
        .expect(0)
        .stderr_has(&["is healthy"]);
    assert_eq!(backups(), 1);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
    db.graph(&["state", &thread]).expect(0);
}

#[test]
fn readers_racing_runs_that_take_write_and_let_go_a_thread_never_see_damage() {
    let db = Db::new();
    let thread = db.finished_thread();
    // Reruns of the thread, back to back: each takes its store, flushes (writing its witness)
    // and lets go, while a reader copies the store whenever nobody holds it.
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for _ in 0..6 {
                db.graph(&["rerun", &thread, "--from", "outline", "--yes"])
                    .expect(0);
            }
        });
        let mut reads = 0;
        while !writer.is_finished() {
            let listed = db.graph(&["threads", "--json"]).expect(0).json();
            assert_ne!(listed[0]["status"], "damaged", "{listed}");
            reads += 1;
        }
        writer.join().unwrap();
        assert!(reads > 3, "{reads}");
    });
}
