//! `graph artifacts`, and edits picked up by `resume` and `rerun`, with the real binary on the
//! pipeline graph (outline.json by `outline`, sections/NN-slug.md by `draft`, document.md by
//! `publish`). The pipeline's `log` field lists every node run, so a test counts reruns.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;
use std::path::Path;

fn log(db: &Db, thread: &str) -> Vec<String> {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    serde_json::from_value(state["values"]["log"].clone()).unwrap()
}

fn finished(db: &Db) -> String {
    db.run_pipeline(1, &["--yes", "--set", ART])
        .expect(0)
        .thread()
}

fn paused(db: &Db) -> String {
    db.run_pipeline(1, &["--set", ART]).expect(3).thread()
}

/// The pipeline writes its files when asked.
const ART: &str = "artifacts=true";

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

#[test]
fn a_run_writes_its_artifacts_and_lists_them() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    let outline: Value =
        serde_json::from_slice(&std::fs::read(v1.join("outline.json")).unwrap()).unwrap();
    assert_eq!(outline["title"], "A short guide to sled");
    let sections: Vec<String> = std::fs::read_dir(v1.join("sections"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(sections.len(), 3, "{sections:?}");
    assert!(v1.join("sections/01-the-case-for-sled.md").exists());
    assert!(std::fs::read_to_string(v1.join("document.md"))
        .unwrap()
        .starts_with("# A short guide to sled"));

    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(
        listed.stdout.contains("pipeline-v1/ (version v1"),
        "{listed}"
    );
    assert!(listed.stdout.contains("outline.json"), "{listed}");
    let doc = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 5);
    for f in files {
        assert_eq!(f["state"]["state"], "unchanged", "{f}");
    }
    let outline = files.iter().find(|f| f["path"] == "outline.json").unwrap();
    assert_eq!(outline["node"], "outline");
    assert_eq!(outline["step"], 1);

    // A second run here gets the next version.
    finished(&db);
    assert!(db.out().join("pipeline-v2/outline.json").exists());
}

#[test]
fn an_edited_outline_reruns_exactly_what_follows_outline() {
    let db = Db::new();
    let thread = finished(&db);
    let before = log(&db, &thread);
    assert_eq!(before.iter().filter(|n| *n == "outline").count(), 1);
    let file = db.out().join("pipeline-v1/outline.json");
    write_json(
        &file,
        &serde_json::json!({"title": "Sled, edited", "sections": ["Why sled", "What sled is"]}),
    );
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("edited"), "{listed}");

    let out = db.graph(&["resume", &thread, "--yes"]).expect(0);
    out.stderr_has(&[
        "picked up edited",
        "outline.json (as node `outline`)",
        "runs again from: draft",
    ]);
    let after = log(&db, &thread);
    let added: Vec<&String> = after[before.len()..].iter().collect();
    assert_eq!(
        added,
        ["draft 0", "draft 1", "review", "publish"],
        "only what follows `outline` ran again"
    );
    let doc = std::fs::read_to_string(db.out().join("pipeline-v1/document.md")).unwrap();
    assert!(doc.starts_with("# Sled, edited"), "{doc}");
    assert!(db
        .out()
        .join("pipeline-v1/sections/02-what-sled-is.md")
        .exists());
    // Nothing is picked up twice.
    let again = db.graph(&["resume", &thread]).output();
    assert!(!again.stderr.contains("picked up"), "{again}");
}

#[test]
fn an_edited_section_is_reviewed_again_with_the_edit() {
    let db = Db::new();
    let thread = paused(&db);
    let file = db.out().join("pipeline-v1/sections/02-how-sled-works.md");
    std::fs::write(
        &file,
        "## How sled works\n\nIt is a log-structured tree. EDITED.\n",
    )
    .unwrap();
    let before = log(&db, &thread);
    db.graph(&["resume", &thread])
        .expect(3)
        .stderr_has(&["(as node `draft`)", "runs again from: review"]);
    let out = db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
    assert!(out.stdout.contains("EDITED"), "{out}");
    let after = log(&db, &thread);
    assert!(
        !after[before.len()..].iter().any(|n| n.starts_with("draft")),
        "no section was drafted again: {after:?}"
    );
}

#[test]
fn an_invalid_edit_is_refused_naming_file_and_line_and_nothing_runs() {
    let db = Db::new();
    let thread = paused(&db);
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let file = db.out().join("pipeline-v1/outline.json");
    std::fs::write(&file, "{\n  \"title\": \"x\",\n  \"sections\": [1]\n}\n").unwrap();
    let out = db.graph(&["resume", &thread, "--resume", "yes"]).expect(2);
    out.stderr_has(&[
        "outline.json:3",
        "field `sections[0]`: the integer 1 is not a text",
        "nothing changed",
        "--ignore-edits",
    ]);
    let section = db
        .out()
        .join("pipeline-v1/sections/01-the-case-for-sled.md");
    std::fs::write(&section, "no heading here\n").unwrap();
    std::fs::write(&file, "{\"title\": \"x\", \"sections\": [\"a\"]}").unwrap();
    db.graph(&["resume", &thread])
        .expect(2)
        .stderr_has(&["sections/01-the-case-for-sled.md:1", "heading"]);
    let after = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(history, after, "no checkpoint was written");
    // --ignore-edits runs without them.
    db.graph(&["resume", &thread, "--resume", "yes", "--ignore-edits"])
        .expect(0);
}

#[test]
fn a_deleted_or_damaged_file_is_reported_and_restored() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    let doc = std::fs::read(v1.join("document.md")).unwrap();
    std::fs::write(v1.join("document.md"), &doc[..doc.len() / 2]).unwrap();
    std::fs::remove_file(v1.join("sections/03-getting-started-with-sled.md")).unwrap();
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("truncated"), "{listed}");
    assert!(listed.stdout.contains("deleted"), "{listed}");
    listed.stderr_has(&["--restore"]);
    db.graph(&["artifacts", &thread, "--restore"]).expect(0);
    assert_eq!(std::fs::read(v1.join("document.md")).unwrap(), doc);
    assert!(v1.join("sections/03-getting-started-with-sled.md").exists());
    let doc = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    for f in doc["files"].as_array().unwrap() {
        assert_eq!(f["state"]["state"], "unchanged", "{f}");
    }
}

#[test]
fn a_rerun_writes_a_new_version_and_resume_picks_one() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    let v1_doc = std::fs::read(v1.join("document.md")).unwrap();
    db.graph(&["rerun", &thread, "--from", "draft", "--yes"])
        .expect(0)
        .stderr_has(&["pipeline-v2/ (version v2)"]);
    assert!(db.out().join("pipeline-v2/document.md").exists());
    assert_eq!(std::fs::read(v1.join("document.md")).unwrap(), v1_doc);
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("version v2 of v1, v2"), "{listed}");

    // An edit in v1, picked by --version.
    write_json(
        &v1.join("outline.json"),
        &serde_json::json!({"title": "Back in v1", "sections": ["One"]}),
    );
    db.graph(&["resume", &thread, "--version", "v1", "--yes"])
        .expect(0)
        .stderr_has(&["pipeline-v1/outline.json (as node `outline`)"]);
    let doc = std::fs::read_to_string(v1.join("document.md")).unwrap();
    assert!(doc.starts_with("# Back in v1"), "{doc}");
    db.graph(&["resume", &thread, "--version", "v9"])
        .expect(2)
        .stderr_has(&["no artifact version `v9`", "v1, v2"]);
}

#[test]
fn a_rerun_keeps_an_edit_only_when_it_starts_right_after_it() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    write_json(
        &v1.join("outline.json"),
        &serde_json::json!({"title": "Edited", "sections": ["One", "Two"]}),
    );
    // `review` does not follow `outline`: the rerun would drop the edit, so it is refused.
    db.graph(&["rerun", &thread, "--from", "review", "--yes"])
        .expect(2)
        .stderr_has(&["outline.json was edited", "not `review`"]);
    let out = db
        .graph(&["rerun", &thread, "--from", "draft", "--yes"])
        .expect(0);
    out.stderr_has(&["picked up edited", "pipeline-v2/"]);
    let doc = std::fs::read_to_string(db.out().join("pipeline-v2/document.md")).unwrap();
    assert!(doc.starts_with("# Edited"), "{doc}");
}

/// Every artifact file a reader can see is whole: outline.json parses, each section is its
/// heading line plus the whole body, and nothing else but hidden temporary files is there.
fn assert_whole(dir: &Path, body_len: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            assert_whole(&path, body_len);
            continue;
        }
        if name.starts_with('.') {
            assert!(
                name.contains(".partial-"),
                "unexpected hidden file {path:?}"
            );
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        match name.as_str() {
            "outline.json" => {
                serde_json::from_slice::<Value>(&bytes)
                    .unwrap_or_else(|e| panic!("{path:?} is not whole JSON: {e}"));
            }
            "document.md" => assert!(bytes.ends_with(b"\n"), "{path:?} cut short"),
            _ => {
                let text = String::from_utf8(bytes).unwrap();
                let body = text.split_once("\n\n").map(|(_, b)| b).unwrap_or("");
                assert_eq!(body.trim_end().len(), body_len, "{path:?} is cut short");
            }
        }
    }
}

/// Runs the pipeline with big sections (each write of the folder takes a while) on threads
/// `{prefix}0..6`, killing each with SIGKILL at a different moment while it writes; checks
/// after each kill that every visible file is whole. Returns the threads.
fn killed_while_writing(db: &Db, prefix: &str, extra: &[&str]) -> (Vec<String>, usize) {
    let body = "x".repeat(100_000);
    let headings: Vec<String> = (0..30).map(|i| format!("Part {i}")).collect();
    let sections = format!("sections={}", serde_json::to_string(&headings).unwrap());
    let template = format!("section_template={body}");
    let mut threads = Vec::new();
    for round in 0..6u64 {
        let thread = format!("{prefix}{round}");
        let mut args = vec![
            "--yes", "--thread", &thread, "--set", &sections, "--set", &template, "--set", ART,
        ];
        args.extend_from_slice(extra);
        let mut run = db.run_pipeline(0, &args).spawn();
        run.wait_for("artifacts: ");
        std::thread::sleep(std::time::Duration::from_millis(20 + round * 45));
        if run.is_running() {
            run.signal(libc::SIGKILL);
        }
        let _ = run.finish();
        assert_whole(&db.out(), body.len());
        threads.push(thread);
    }
    (threads, body.len())
}

/// Resumes each thread: none of the engine's own files is taken for an edit, and afterwards
/// every file is as the newest checkpoint renders it.
fn resumed_without_edits(db: &Db, threads: &[String], body_len: usize) {
    for thread in threads {
        let out = db.graph(&["resume", thread, "--yes"]).output();
        assert!(
            !out.stderr.contains("picked up edited") && !out.stderr.contains("was deleted"),
            "a file the run wrote was read as a person's edit\n{out}"
        );
        let doc = db.graph(&["artifacts", thread, "--json"]).expect(0).json();
        assert!(doc["partials"].as_array().unwrap().is_empty(), "{doc}");
        for f in doc["files"].as_array().unwrap() {
            assert_eq!(f["state"]["state"], "unchanged", "{f}");
        }
    }
    assert_whole(&db.out(), body_len);
}

#[test]
fn kill_9_while_artifacts_are_written_leaves_no_partial_file() {
    let db = Db::new();
    let (threads, body_len) = killed_while_writing(&db, "k", &[]);
    resumed_without_edits(&db, &threads, body_len);
}

#[test]
fn kill_9_in_async_mode_never_makes_the_engines_files_look_edited() {
    // Checkpoints reach the disk after their files may have: a kill can lose the checkpoint
    // whose files are already written.
    let db = Db::new();
    let (threads, body_len) = killed_while_writing(&db, "a", &["--durability", "async"]);
    resumed_without_edits(&db, &threads, body_len);
}

#[test]
fn a_fork_writes_into_a_new_version_folder() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    let doc = std::fs::read(v1.join("document.md")).unwrap();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    // The checkpoint after `outline`: the fork drafts, reviews and publishes again.
    let after_outline = history
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["step"] == 1)
        .unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    db.graph(&[
        "fork",
        &thread,
        "--checkpoint",
        &after_outline,
        "--to",
        "forked",
    ])
    .expect(0);
    db.graph(&["resume", "forked", "--yes"])
        .expect(0)
        .stderr_has(&["pipeline-v2/ (version v2)"]);
    assert!(db.out().join("pipeline-v2/document.md").exists());
    assert_eq!(std::fs::read(v1.join("document.md")).unwrap(), doc);
}

#[test]
fn resume_out_writes_a_new_version_there_after_picking_up_edits_where_they_are() {
    let db = Db::new();
    let thread = paused(&db);
    let v1 = db.out().join("pipeline-v1");
    // GRAPH_OUT (set by the harness) is where the thread's folder is: nothing moves.
    let out = db.graph(&["resume", &thread]).expect(3);
    assert!(!out.stderr.contains("artifacts: "), "{out}");
    assert!(!db.out().join("pipeline-v2").exists());

    write_json(
        &v1.join("outline.json"),
        &serde_json::json!({"title": "Moved", "sections": ["One"]}),
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path().display().to_string();
    let out = db
        .graph(&["resume", &thread, "--yes", "--out", &dir])
        .expect(0);
    out.stderr_has(&[
        "picked up edited",
        "pipeline-v1/outline.json (as node `outline`)",
        "pipeline-v2/ (version v2: the files of",
        "that folder is kept",
    ]);
    let v2 = elsewhere.path().join("pipeline-v2");
    let doc = std::fs::read_to_string(v2.join("document.md")).unwrap();
    assert!(doc.starts_with("# Moved"), "{doc}");
    assert!(v2.join("outline.json").exists());
    assert!(
        !v1.join("document.md").exists(),
        "the old folder is kept as it was"
    );
    let listed = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    assert_eq!(listed["folder"]["label"], "v2");
    assert_eq!(listed["versions"].as_array().unwrap().len(), 2);
    for f in listed["files"].as_array().unwrap() {
        assert_eq!(f["state"]["state"], "unchanged", "{f}");
    }
}

#[test]
fn an_outline_rewritten_with_the_same_content_reruns_nothing() {
    let db = Db::new();
    let thread = finished(&db);
    let before = log(&db, &thread);
    let file = db.out().join("pipeline-v1/outline.json");
    let outline: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // As an editor might save it: compact, same content.
    std::fs::write(&file, serde_json::to_string(&outline).unwrap()).unwrap();
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("same content"), "{listed}");
    let out = db.graph(&["resume", &thread, "--yes"]).expect(0);
    out.stderr_has(&["outline.json was rewritten but says what the checkpoint holds"]);
    assert!(!out.stderr.contains("picked up edited"), "{out}");
    assert_eq!(log(&db, &thread), before, "no node ran again");
}

#[test]
fn graph_artifacts_removes_the_unfinished_writes_of_a_killed_writer() {
    let db = Db::new();
    let thread = finished(&db);
    let v1 = db.out().join("pipeline-v1");
    // What a writer killed mid-write leaves (pid 0x7fff_fff0 is never a live one on Linux),
    // and what a writer still running has in flight (this test's own process).
    let dead = ".document.md.partial-2147483632-0";
    let live = format!(".outline.json.partial-{}-0", std::process::id());
    std::fs::write(v1.join(dead), "x".repeat(80_000)).unwrap();
    std::fs::write(v1.join("sections").join(dead), b"half").unwrap();
    std::fs::write(v1.join(&live), b"in flight").unwrap();
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(
        listed.stdout.contains(&format!(
            "{dead}: an unfinished write of a process that died: removed"
        )),
        "{listed}"
    );
    assert!(!v1.join(dead).exists() && !v1.join("sections").join(dead).exists());
    assert!(v1.join(&live).exists(), "a live writer's file is its own");
    let doc = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    assert!(doc["partials"].as_array().unwrap().is_empty(), "{doc}");
}
