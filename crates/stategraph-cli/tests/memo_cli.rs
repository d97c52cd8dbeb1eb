//! The memo pipeline's artifacts through the real `graph` binary (offline, no key): each stage's
//! file in `Fernstone-v0.0.N/`, `graph artifacts`, an edited `1-research.json` picked up by
//! `graph resume`, `graph rerun --from cite` into a new version, a kill -9 leaving the finished
//! stages' files, and a damaged artifact reported.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;
use std::path::PathBuf;

fn version(db: &Db, n: u32) -> PathBuf {
    db.path().join("output").join(format!("Fernstone-v0.0.{n}"))
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(db: &Db) -> (String, String) {
    let out = db
        .graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(0);
    (out.thread(), out.stdout.trim_end().to_string())
}

/// The stage numbers of the `stage k of 13` lines a command printed.
fn stages_run(stderr: &str) -> Vec<usize> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("stage ")?.split(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn a_run_writes_every_artifact_and_graph_artifacts_lists_them() {
    let db = Db::new();
    let (thread, memo) = run(&db);
    let dir = version(&db, 1);
    for file in [
        "0-deck-analysis.json",
        "1-research.json",
        "1-section-research.json",
        "2-sections/01-executive-summary.md",
        "2-sections/04-team.md",
        "2-sections/10-risks-and-recommendation.md",
        "header.md",
        "4-final-draft.md",
        "3-validation.json",
        "state.json",
    ] {
        assert!(dir.join(file).is_file(), "no {file} in {}", dir.display());
    }
    assert_eq!(read(dir.join("4-final-draft.md")).trim_end(), memo);
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("Fernstone-v0.0.1"), "{listed}");
    assert!(listed.stdout.contains("3-validation.json"), "{listed}");
}

#[test]
fn an_edited_research_file_is_picked_up_by_resume() {
    let db = Db::new();
    let (thread, _) = run(&db);
    let file = version(&db, 1).join("1-research.json");
    let mut research: Value = serde_json::from_str(&read(file.clone())).unwrap();
    let edit = "EDITED: the serviceable market is smaller than the deck says.";
    research["topics"][0]["summary"] = Value::String(edit.into());
    std::fs::write(&file, serde_json::to_string_pretty(&research).unwrap()).unwrap();
    let out = db
        .graph(&["resume", &thread])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(0);
    out.stderr_has(&["1-research.json"]);
    assert_eq!(
        stages_run(&out.stderr),
        (3..=13).collect::<Vec<_>>(),
        "{out}"
    );
    assert!(out.stdout.contains(edit), "{out}");
    assert!(read(version(&db, 1).join("4-final-draft.md")).contains(edit));
}

#[test]
fn rerun_from_cite_writes_a_new_version() {
    let db = Db::new();
    let (thread, memo) = run(&db);
    let out = db
        .graph(&["rerun", &thread, "--from", "cite", "--yes"])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(0);
    assert_eq!(
        stages_run(&out.stderr),
        (9..=13).collect::<Vec<_>>(),
        "{out}"
    );
    assert_eq!(
        read(version(&db, 2).join("4-final-draft.md")).trim_end(),
        memo
    );
    assert_eq!(
        read(version(&db, 1).join("4-final-draft.md")).trim_end(),
        memo
    );
    assert!(version(&db, 2).join("2-sections/04-team.md").is_file());
}

#[test]
fn a_kill_leaves_the_finished_stages_files_and_a_damaged_one_is_reported() {
    let db = Db::new();
    let mut running = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            "stage_ms=300",
        ])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .spawn();
    let thread = running.thread();
    // A checkpoint's files (and their manifest) are written by the command's event loop before
    // it prints the next event: once `draft` is shown started, `section_research`'s files are
    // all there. The kill lands in `draft`, or a little later on a loaded machine.
    running.wait_for("step 4: draft started");
    running.signal(libc::SIGKILL);
    running.finish();
    // Where it landed is what the store says (the last saved step is the last finished stage).
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    let saved = state["step"].as_u64().expect("a step") as usize;
    assert!(
        saved >= 3,
        "section_research was saved before draft started\n{state:#}"
    );
    let dir = version(&db, 1);
    assert!(dir.join("1-section-research.json").is_file());
    if saved < 9 {
        // `cite` writes it after its checkpoint.
        assert!(!dir.join("4-final-draft.md").exists());
    }

    // Cut short, as a crashed editor or a full disk leaves a file.
    let file = dir.join("1-section-research.json");
    let text = read(file.clone());
    std::fs::write(&file, &text[..text.len() / 3]).unwrap();
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("truncated"), "{listed}");
    let refused = db
        .graph(&["resume", &thread, "--set", "stage_ms=0"])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .output();
    assert_eq!(refused.code, Some(2), "{refused}");
    refused.stderr_has(&["1-section-research.json"]);
    db.graph(&["artifacts", &thread, "--restore"]).expect(0);
    let done = db
        .graph(&["resume", &thread, "--set", "stage_ms=0"])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(0);
    assert_eq!(
        stages_run(&done.stderr),
        (saved + 1..=13).collect::<Vec<_>>(),
        "{done}"
    );
    assert!(dir.join("4-final-draft.md").is_file());
}
