//! A full disk, for real: a small tmpfs (see `support/small_fs.rs`), filled until a run cannot
//! save its next step.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/small_fs.rs"]
mod small_fs;

use harness::Db;
use std::path::Path;
use std::time::{Duration, Instant};

/// A pipeline input of `bytes` bytes, in a file off the small filesystem.
fn input_file(bytes: usize) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let doc = serde_json::json!({ "topic": "x".repeat(bytes) });
    std::fs::write(file.path(), doc.to_string()).unwrap();
    file
}

/// Runs the pipeline on a disk left with `free` bytes, with an input of `input` bytes, and checks
/// that it ends quickly with a clear error, that reads still work on the full disk, and that once
/// space is freed the thread resumes to its end.
fn full_disk_run(disk: &Path, free: u64, input: usize, kept: Option<bool>) {
    let db = Db::new_in(disk);
    // A thread from before the disk filled up, to read while it is full.
    let earlier = db.finished_thread();
    let filler = small_fs::fill(disk, free);
    let input = input_file(input);

    let started = Instant::now();
    let run = db
        .graph(&[
            "run",
            "pipeline",
            "--input-file",
            input.path().to_str().unwrap(),
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .spawn()
        .finish();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "took {took:?}\n{run}");
    assert_eq!(run.code, Some(1), "{run}");
    run.stderr_has(&["disk holding", "is full"]);

    // Reading works on the full disk, also when the temporary directory is on it.
    let tmp = disk.join("tmp");
    std::fs::create_dir_all(&tmp).ok();
    for args in [
        vec!["threads"],
        vec!["state", earlier.as_str()],
        vec!["history", earlier.as_str()],
    ] {
        db.graph(&args).env("TMPDIR", &tmp).expect(0);
    }
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    let threads = listed.as_array().unwrap();
    let thread = run.stderr.lines().find_map(|l| l.strip_prefix("thread "));
    let listed_it = thread.is_some_and(|t| threads.iter().any(|l| l["thread_id"] == t));
    if let Some(kept) = kept {
        assert_eq!(listed_it, kept, "{run}\n{listed}");
    }
    match thread {
        Some(thread) if listed_it => {
            // Kept: it saved steps before the disk filled. It says how to continue, and does.
            run.stderr_has(&["the last saved step is", &format!("graph resume {thread}")]);
            std::fs::remove_file(&filler).unwrap();
            db.graph(&["resume", thread]).expect(0);
        }
        Some(_) => {
            // Nothing of it was saved, and nothing of it is listed.
            run.stderr_has(&["was saved; free some space and run it again"]);
            assert_eq!(threads.len(), 1, "{listed}");
        }
        None => panic!("no thread line\n{run}"),
    }
}

#[test]
fn a_full_disk_ends_a_run_of_small_values_within_seconds_with_a_clear_error() {
    small_fs::with_small_fs(
        "a_full_disk_ends_a_run_of_small_values_within_seconds_with_a_clear_error",
        "4m",
        |disk| full_disk_run(disk, 8 * 1024, 200, None),
    );
}

#[test]
fn a_full_disk_ends_a_run_of_large_values_within_seconds_with_a_clear_error() {
    small_fs::with_small_fs(
        "a_full_disk_ends_a_run_of_large_values_within_seconds_with_a_clear_error",
        "4m",
        |disk| full_disk_run(disk, 400 * 1024, 150_000, Some(true)),
    );
}
