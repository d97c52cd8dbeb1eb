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

/// A memo run (`--out` on the small disk) that fills the disk as it goes, for a range of space
/// left: it never ends "done" with a store it could not flush (that is a failed run, exit 1,
/// saying what failed and that a resume goes on), and once space is freed, `graph resume`
/// finishes the thread and writes every artifact file the full disk left behind.
#[test]
fn a_full_disk_never_ends_a_memo_run_done_and_the_next_resume_writes_its_stale_files() {
    small_fs::with_small_fs(
        "a_full_disk_never_ends_a_memo_run_done_and_the_next_resume_writes_its_stale_files",
        "2m",
        |disk| {
            for free_kb in (420..=600).step_by(10) {
                let db = Db::new_in(disk);
                let out_dir = db.path().join("out");
                let out_arg = out_dir.display().to_string();
                let filler = small_fs::fill(disk, free_kb * 1024);
                let args = [
                    "run",
                    "memo",
                    "--input",
                    "Fernstone",
                    "--yes",
                    "--out",
                    &out_arg,
                ];
                let run = db.graph(&args).without_model().spawn().finish();
                let thread = run.stderr.lines().find_map(|l| l.strip_prefix("thread "));
                let thread = thread.map(|t| t.split_whitespace().next().unwrap().to_string());
                let case = format!("with {free_kb} KB free:\n{run}");
                assert!(
                    !run.stderr.contains("warning: could not flush"),
                    "a failed flush is not a warning {case}"
                );
                match run.code {
                    Some(0) => {}
                    Some(1) => {
                        if run.stderr.contains("could not flush the thread's store") {
                            run.stderr_has(&["is full", "Free some space", "graph resume"]);
                        }
                    }
                    _ => panic!("exit 0 or 1 expected {case}"),
                }
                std::fs::remove_file(&filler).unwrap();
                let Some(thread) = thread.filter(|t| db.thread_ids().contains(t)) else {
                    continue;
                };
                db.graph(&["resume", &thread]).without_model().expect(0);
                let listed = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
                assert_eq!(listed["step"], 13, "{case}\n{listed:#}");
                for f in listed["files"].as_array().unwrap() {
                    assert_eq!(f["state"]["state"], "unchanged", "{case}\n{f}");
                }
                let folder = Path::new(listed["folder"]["dir"].as_str().unwrap());
                let state = std::fs::read(folder.join("state.json")).unwrap();
                let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
                assert!(state["final_draft"].is_string(), "{case}");
            }
        },
    );
}
