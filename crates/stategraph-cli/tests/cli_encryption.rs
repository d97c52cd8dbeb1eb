//! Encryption at rest through the `graph` command: with GRAPH_ENCRYPTION_KEY set every command
//! reads and writes sealed records; the store's files hold no plaintext of the run; a missing or
//! wrong key is exit 2 with the thread named; keys rotate and `graph rekey` moves threads to the
//! newest; a run killed with SIGKILL resumes under encryption without rerunning saved steps.
//! And `graph prune --policy` applies a graph file's `[retention]`.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Output, Project, TestCommand};
use std::path::Path;

const KEY: &str = "GRAPH_ENCRYPTION_KEY";
/// Two keys (32 bytes each, base64): 0x01 x 32 and 0x02 x 32.
const A: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const B: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// The run's input, looked for in the store's files.
const TOPIC: &str = "zanzibar otters";

fn with_key(cmd: TestCommand, keys: &str) -> TestCommand {
    cmd.env(KEY, keys).env_remove("GRAPH_ENCRYPTION_KEY_FILE")
}

fn run_finished(db: &Db, keys: &str) -> String {
    let args = [
        "run",
        "pipeline",
        "--input",
        TOPIC,
        "--yes",
        "--set",
        "step_ms=1",
    ];
    with_key(db.graph(&args), keys).expect(0).thread()
}

/// True when any file under `dir` holds `needle`.
fn files_hold(dir: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            files_hold(&p, needle)
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle)
        }
    })
}

fn state(db: &Db, thread: &str, keys: Option<&str>) -> TestCommand {
    let cmd = db.graph(&["state", thread, "--json"]);
    match keys {
        Some(k) => with_key(cmd, k),
        None => cmd.env_remove(KEY).env_remove("GRAPH_ENCRYPTION_KEY_FILE"),
    }
}

#[test]
fn a_sealed_store_reads_back_and_its_files_hold_no_plaintext() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("k1:{A}"));
    let read = state(&db, &thread, Some(&format!("k1:{A}")))
        .expect(0)
        .json();
    assert!(read["values"].to_string().contains(TOPIC), "{read:#}");
    assert!(
        !files_hold(&db.path().join("threads"), TOPIC.as_bytes()),
        "the input reached the store's files in plaintext"
    );
    // The listing still says where each thread stands without a key.
    let rows = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(rows[0]["status"], "done", "{rows:#}");
}

fn refused(out: &Output, thread: &str, words: &str) {
    assert!(out.stderr.contains(thread), "{out}");
    assert!(out.stderr.contains(words), "{out}");
    assert!(!out.stderr.contains("damaged"), "{out}");
}

#[test]
fn a_missing_or_wrong_key_is_exit_2_naming_the_thread() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("k1:{A}"));
    let none = state(&db, &thread, None).expect(2);
    refused(&none, &thread, "`k1`");
    let wrong = state(&db, &thread, Some(&format!("k1:{B}"))).expect(2);
    refused(&wrong, &thread, "different key");
    let other = state(&db, &thread, Some(&format!("k2:{B}"))).expect(2);
    refused(&other, &thread, "not among the configured");
    let bad = state(&db, &thread, Some("k1:not-a-key")).expect(2);
    assert!(bad.stderr.contains("base64"), "{bad}");
}

#[test]
fn keys_rotate_and_rekey_lets_the_old_one_go() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("old:{A}"));
    let both = format!("new:{B},old:{A}");
    let before = state(&db, &thread, Some(&both)).expect(0).json()["values"].clone();
    let rekeyed = with_key(db.graph(&["rekey", "--all", "--json"]), &both)
        .expect(0)
        .json();
    assert_eq!(rekeyed["key"], "new");
    assert!(
        rekeyed["threads"][0]["checkpoints"].as_u64().unwrap() > 0,
        "{rekeyed:#}"
    );
    let after = state(&db, &thread, Some(&format!("new:{B}")))
        .expect(0)
        .json();
    assert_eq!(after["values"], before);
    // Without a key, rekey says what to set.
    let no_key = db.graph(&["rekey", &thread]).env_remove(KEY).expect(2);
    assert!(no_key.stderr.contains("GRAPH_ENCRYPTION_KEY"), "{no_key}");
}

#[test]
fn kill_9_then_resume_under_encryption_reruns_no_saved_step() {
    let db = Db::new();
    let keys = format!("k1:{A}");
    let args = [
        "run",
        "pipeline",
        "--input",
        TOPIC,
        "--yes",
        "--set",
        "step_ms=1000",
    ];
    let mut run = with_key(db.graph(&args), &keys).spawn();
    let thread = run.thread();
    run.wait_for("publish started");
    run.signal(libc::SIGKILL);
    assert_eq!(run.finish().code, None);
    let resumed = with_key(db.graph(&["resume", &thread]), &keys).expect(0);
    for node in ["outline", "review"] {
        assert!(
            !resumed.stderr.contains(&format!(": {node} started")),
            "{node} was saved and must not run again\n{resumed}"
        );
    }
    let read = state(&db, &thread, Some(&keys)).expect(0).json();
    let log: Vec<String> = serde_json::from_value(read["values"]["log"].clone()).unwrap();
    assert_eq!(
        log,
        ["outline", "draft 0", "draft 1", "draft 2", "review", "publish"]
    );
    assert!(!files_hold(&db.path().join("threads"), TOPIC.as_bytes()));
}

#[test]
fn prune_by_policy_applies_the_graph_files_retention() {
    let db = Db::new();
    let project = Project::new();
    project.graph_file("pipeline", |text| {
        format!("{text}\n[retention]\nkeep_checkpoints = 2\n")
    });
    let in_project = |args: &[&str]| db.graph(args).current_dir(project.path());
    let done = in_project(&[
        "run",
        "pipeline",
        "--input",
        "x",
        "--yes",
        "--set",
        "step_ms=1",
    ])
    .expect(0)
    .thread();
    let paused = in_project(&["run", "pipeline", "--input", "y", "--set", "step_ms=1"])
        .expect(3)
        .thread();
    let count = |thread: &str| {
        let h = db.graph(&["history", thread, "--json"]).expect(0).json();
        h.as_array().map(Vec::len).unwrap_or(0)
    };
    let paused_before = count(&paused);
    assert!(count(&done) > 2 && paused_before > 2);

    let report = in_project(&["prune", "--policy", "--json"])
        .expect(0)
        .json();
    let graphs = report["graphs"].as_array().unwrap();
    let pipeline = graphs.iter().find(|g| g["graph"] == "pipeline").unwrap();
    assert_eq!(
        pipeline["report"]["pruned"][0]["thread"],
        done.as_str(),
        "{report:#}"
    );
    assert_eq!(count(&done), 2);
    assert_eq!(
        count(&paused),
        paused_before,
        "a paused thread is not touched"
    );
    // The finished thread still reads.
    db.graph(&["state", &done, "--json"]).expect(0);
}
