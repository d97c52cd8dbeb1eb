//! Artifact files that are out of date with their thread, and files a person changed that a
//! run would write over, with the real binary on the pipeline graph (outline.json by
//! `outline`, sections/NN-slug.md by `draft`, document.md by `publish`): nothing a person wrote,
//! and nothing the thread's state holds, is ever lost without being said.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/small_fs.rs"]
mod small_fs;

use harness::Db;
use serde_json::{json, Value};
use std::path::Path;

/// The pipeline writes its files when asked.
const ART: &str = "artifacts=true";

fn paused(db: &Db) -> String {
    db.run_pipeline(1, &["--set", ART]).expect(3).thread()
}

fn values(db: &Db, thread: &str) -> Value {
    db.graph(&["state", thread, "--json"]).expect(0).json()["values"].clone()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn an_edit_of_a_file_the_state_changed_since_is_refused_instead_of_undoing_the_change() {
    let db = Db::new();
    let thread = paused(&db);
    let v1 = db.out().join("pipeline-v1");
    // The state moves on without the folder: `graph update` writes no files.
    db.graph(&[
        "update",
        &thread,
        "--set-json",
        r#"{"title": "Retitled by update"}"#,
        "--as-node",
        "outline",
    ])
    .expect(0);
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("behind"), "{listed}");
    listed.stderr_has(&["older than the thread's state", "--restore"]);
    // A person edits the copy they see, which still has the old title.
    let file = v1.join("outline.json");
    let mut outline: Value = serde_json::from_str(&read(&file)).unwrap();
    assert_ne!(outline["title"], "Retitled by update");
    outline["sections"]
        .as_array_mut()
        .unwrap()
        .push(json!("Added by a person"));
    std::fs::write(&file, serde_json::to_string_pretty(&outline).unwrap()).unwrap();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();

    let out = db.graph(&["resume", &thread]).expect(2);
    out.stderr_has(&[
        "outline.json: changed, but this file is as written for step 1",
        "would undo that change",
        "--restore",
        "nothing changed",
    ]);
    assert_eq!(
        db.graph(&["history", &thread, "--json"]).expect(0).json(),
        history,
        "no checkpoint was written"
    );
    assert_eq!(values(&db, &thread)["title"], "Retitled by update");
    assert!(
        read(&file).contains("Added by a person"),
        "the edit is kept"
    );

    // As the refusal says: the current files, then the edit again on them.
    db.graph(&["artifacts", &thread, "--restore"]).expect(0);
    let mut outline: Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(outline["title"], "Retitled by update");
    outline["sections"]
        .as_array_mut()
        .unwrap()
        .push(json!("Added by a person"));
    std::fs::write(&file, serde_json::to_string_pretty(&outline).unwrap()).unwrap();
    db.graph(&["resume", &thread])
        .expect(3)
        .stderr_has(&["picked up edited", "outline.json (as node `outline`)"]);
    let state = values(&db, &thread);
    assert_eq!(state["title"], "Retitled by update");
    assert_eq!(state["outline"].as_array().unwrap().len(), 4, "{state}");
}

#[test]
fn an_edit_beside_a_file_the_state_changed_since_is_refused_for_the_whole_folder() {
    let db = Db::new();
    let thread = paused(&db);
    let sections = db.out().join("pipeline-v1/sections");
    let mut names: Vec<String> = std::fs::read_dir(&sections)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // The first section changes in the state only.
    let first = values(&db, &thread)["sections"][0].clone();
    let update = json!({"sections": [{"index": first["index"], "heading": first["heading"],
        "body": "Rewritten by update."}]});
    db.graph(&[
        "update",
        &thread,
        "--set-json",
        &update.to_string(),
        "--as-node",
        "draft",
    ])
    .expect(0);
    // A person edits the second, which is current; the folder is read whole, first included.
    let second = sections.join(&names[1]);
    let text = read(&second);
    std::fs::write(&second, format!("{text}\nA person's line.\n")).unwrap();

    db.graph(&["resume", &thread]).expect(2).stderr_has(&[
        &format!("not read: `sections/{}` of the same artifact", names[0]),
        "would undo that change",
        "--restore",
    ]);
    let state = values(&db, &thread);
    assert_eq!(state["sections"][0]["body"], "Rewritten by update.");
    assert!(read(&second).contains("A person's line."));
}

#[test]
fn ignore_edits_keeps_the_changed_files_and_writes_a_new_version_folder() {
    let db = Db::new();
    let thread = paused(&db);
    let v1 = db.out().join("pipeline-v1");
    let name = std::fs::read_dir(v1.join("sections"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .min()
        .unwrap();
    let edited = v1.join("sections").join(&name);
    std::fs::write(&edited, "## Mine\n\nA person's own text.\n").unwrap();
    // Answering with an edit in the folder is refused, and the refusal offers --ignore-edits.
    db.graph(&["resume", &thread, "--resume", "shorter please"])
        .expect(2)
        .stderr_has(&["--ignore-edits"]);

    // The notes draft every section again: the run writes them, but not over the person's.
    let out = db
        .graph(&[
            "resume",
            &thread,
            "--resume",
            "shorter please",
            "--ignore-edits",
        ])
        .expect(3);
    assert_eq!(read(&edited), "## Mine\n\nA person's own text.\n");
    out.stderr_has(&[
        "--ignore-edits: ",
        "pipeline-v1/ keeps the files changed there as they are",
        &name,
        "pipeline-v2/ (version v2)",
    ]);
    let rewritten = read(&db.out().join("pipeline-v2/sections").join(&name));
    assert!(rewritten.contains("Revised: shorter please"), "{rewritten}");
    let listed = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    assert_eq!(listed["folder"]["label"], "v2");
}

#[test]
fn a_read_only_output_folder_is_a_warning_that_says_how_to_write_the_files_later() {
    small_fs::with_small_fs(
        "a_read_only_output_folder_is_a_warning_that_says_how_to_write_the_files_later",
        "8m",
        |disk| {
            let db = Db::new();
            let out_dir = disk.join("out dir");
            let out_arg = out_dir.display().to_string();
            // The harness points GRAPH_OUT elsewhere: every command says where the folder is.
            let graph = |args: &[&str]| db.graph(args).env("GRAPH_OUT", &out_arg);
            let thread = db
                .run_pipeline(1, &["--set", ART])
                .env("GRAPH_OUT", &out_arg)
                .expect(3)
                .thread();
            let mount = |how: &str| {
                let status = std::process::Command::new("mount")
                    .args(["-o", how])
                    .arg(disk)
                    .status()
                    .expect("mount");
                assert!(status.success(), "mount -o {how} failed");
            };
            mount("remount,ro");
            let out = graph(&["resume", &thread, "--resume", "more detail"]).expect(3);
            out.stderr_has(&[
                "warning: artifacts not written: cannot write",
                "Read-only file system",
                "the run goes on",
                &format!("artifacts {thread} --restore"),
            ]);
            let listed = graph(&["artifacts", &thread]).expect(0);
            assert!(listed.stdout.contains("behind"), "{listed}");
            mount("remount,rw");
            graph(&["artifacts", &thread, "--restore"]).expect(0);
            let sections = out_dir.join("pipeline-v1/sections");
            for entry in std::fs::read_dir(&sections).unwrap() {
                let text = read(&entry.unwrap().path());
                assert!(text.contains("Revised: more detail"), "{text}");
            }
        },
    );
}

#[test]
fn a_folder_that_cannot_be_read_is_refused_with_a_way_on() {
    let db = Db::new();
    let thread = paused(&db);
    let sections = db.out().join("pipeline-v1/sections");
    // A file where the run's folder of sections was: nothing in it can be read.
    std::fs::remove_dir_all(&sections).unwrap();
    std::fs::write(&sections, "in the way\n").unwrap();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();

    let out = db.graph(&["resume", &thread]).expect(2);
    out.stderr_has(&["cannot read", "Not a directory", "--ignore-edits"]);
    assert_eq!(
        out.stderr.matches("Not a directory").count(),
        1,
        "the reason is said once: {out}"
    );
    assert_eq!(
        db.graph(&["history", &thread, "--json"]).expect(0).json(),
        history
    );
    // The way on it gives: the run writes a new version folder, this one stays as it is.
    db.graph(&["resume", &thread, "--resume", "yes", "--ignore-edits"])
        .expect(0)
        .stderr_has(&["pipeline-v2/ (version v2)"]);
    assert_eq!(read(&sections), "in the way\n");
    assert!(db.out().join("pipeline-v2/document.md").exists());
}

#[test]
fn a_json_syntax_error_names_its_line_and_no_made_up_field() {
    let db = Db::new();
    let thread = paused(&db);
    let file = db.out().join("pipeline-v1/outline.json");
    // Cut off inside a key: there is no field to name yet.
    std::fs::write(&file, "{\n  \"tit\n").unwrap();
    let out = db.graph(&["resume", &thread]).expect(2);
    out.stderr_has(&["outline.json:2: control character"]);
    assert!(!out.stderr.contains("field `?`"), "{out}");
}

#[test]
fn a_file_given_as_the_output_folder_is_refused_before_anything_runs() {
    let db = Db::new();
    let file = db.path().join("not-a-folder");
    std::fs::write(&file, "x").unwrap();
    let file = file.display().to_string();
    db.run_pipeline(0, &["--set", ART, "--yes", "--out", &file])
        .expect(2)
        .stderr_has(&["is a file, not a folder"]);
    assert!(db.thread_ids().is_empty(), "no thread was made");
    // GRAPH_OUT is read the same way.
    db.run_pipeline(0, &["--set", ART, "--yes"])
        .env("GRAPH_OUT", &file)
        .expect(2)
        .stderr_has(&["is a file, not a folder"]);
}
