//! The memo pipeline with files a person got wrong, through the real `graph` binary (offline,
//! no key): a data room document that is not UTF-8 (a Windows or Latin-1 file) and an artifact
//! emptied before a resume. Each is refused saying where and what to do; nothing is lost.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use std::path::Path;

/// A copy of the bundled data room under `root/fernstone`.
fn copy_room(root: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom/fernstone");
    let to = root.join("fernstone");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_data_room_document_that_is_not_utf8_is_named_with_its_line_and_how_to_convert_it() {
    let db = Db::new();
    let rooms = tempfile::tempdir().unwrap();
    copy_room(rooms.path());
    let file = rooms.path().join("fernstone/financials.md");
    let mut bytes = std::fs::read(&file).unwrap();
    let line = 1 + bytes.iter().filter(|b| **b == b'\n').count();
    // "Café" as Windows-1252 writes it.
    bytes.extend_from_slice(b"Caf\xe9 revenue was $3.1M.\n");
    std::fs::write(&file, bytes).unwrap();
    let room = format!("dataroom={}", rooms.path().display());
    let out = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            &room,
        ])
        .without_model()
        .expect(1);
    out.stderr_has(&[
        &format!("financials.md is not UTF-8 text (line {line}: byte 0xE9)"),
        "iconv -f windows-1252 -t utf-8",
    ]);
}

#[test]
fn an_emptied_artifact_is_refused_as_empty_and_the_run_goes_on_once_it_is_restored() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--set",
            "review_below=10",
        ])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(3);
    let thread = out.thread();
    let header = db.path().join("output/Fernstone-v0.0.1/header.md");
    std::fs::write(&header, "").unwrap();
    let listed = db.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("empty ("), "{listed}");
    db.graph(&["resume", &thread])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(2)
        .stderr_has(&["header.md: empty (", "--restore", "nothing changed"]);
    db.graph(&["artifacts", &thread, "--restore"]).expect(0);
    assert!(std::fs::read_to_string(&header)
        .unwrap()
        .starts_with("# Fernstone"));
    db.graph(&["resume", &thread, "--resume", "approve"])
        .env("GRAPH_OUT", db.path().join("output"))
        .without_model()
        .expect(0);
}

/// `graph artifacts ID` says, for each file, which node last changed it and at which step (the
/// two agree with `graph history`), and, where that is another node, the node an edit of the
/// file is applied as: a section last changed by `enrich_links` at step 7 is edited as the
/// output of `enrich_visualizations`, the stage that last writes sections. The same when the
/// run wrote its files only at its end (`--stream values` reports no checkpoints).
#[test]
fn artifacts_names_the_node_and_step_that_last_changed_each_file_and_what_an_edit_is_applied_as() {
    for stream in [None, Some("values")] {
        let db = Db::new();
        let mut args = vec!["run", "memo", "--input", "Fernstone", "--yes"];
        args.extend(stream.iter().flat_map(|mode| ["--stream", *mode]));
        let thread = db.graph(&args).without_model().expect(0).thread();
        let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
        let writers = |step: u64| -> String {
            let entry = history
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["step"] == step);
            let names = entry.unwrap()["metadata"]["writers"].as_array().unwrap();
            let names: Vec<&str> = names.iter().map(|w| w.as_str().unwrap()).collect();
            names.join(", ")
        };
        let listed = db.graph(&["artifacts", &thread, "--json"]).expect(0).json();
        let files = listed["files"].as_array().unwrap();
        assert!(files.len() > 10, "{listed:#}");
        for f in files {
            let step = f["step"].as_u64().unwrap_or_else(|| panic!("{f}"));
            assert_eq!(f["node"], writers(step), "{stream:?}: {f}");
        }
        let summary = files
            .iter()
            .find(|f| f["path"] == "2-sections/01-executive-summary.md")
            .unwrap();
        assert_eq!(summary["node"], "enrich_links", "{stream:?}: {summary}");
        assert_eq!(summary["step"], 7, "{stream:?}: {summary}");
        assert_eq!(summary["edit_as"], "enrich_visualizations", "{summary}");
        let validation = files
            .iter()
            .find(|f| f["path"] == "3-validation.json")
            .unwrap();
        assert_eq!(
            (
                &validation["node"],
                &validation["step"],
                &validation["edit_as"]
            ),
            (&"validate".into(), &12.into(), &"validate".into()),
            "{stream:?}: {validation}"
        );

        let text = db.graph(&["artifacts", &thread]).expect(0);
        let row = |path: &str| {
            let line = text
                .stdout
                .lines()
                .find(|l| l.trim_start().starts_with(path));
            line.unwrap_or_else(|| panic!("no row for {path}\n{text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(text.stdout.contains("changed by"), "{text}");
        assert_eq!(
            row("2-sections/01-executive-summary.md"),
            "2-sections/01-executive-summary.md enrich_links 7 ok (an edit is applied as enrich_visualizations)",
        );
        assert_eq!(row("3-validation.json"), "3-validation.json validate 12 ok");
    }
}

/// Run from a folder of one's own: a data room is looked for in `./examples/dataroom/` there
/// first, then in the source tree the binary was built from (then in the sample the binary
/// carries). A folder `examples/dataroom/` of one's own does not hide the bundled sample.
#[test]
fn a_data_room_folder_in_the_current_folder_is_used_and_does_not_hide_the_sample() {
    let db = Db::new();
    let project = tempfile::tempdir().unwrap();
    let rooms = project.path().join("examples/dataroom");
    copy_room(&rooms);
    std::fs::rename(rooms.join("fernstone"), rooms.join("acme")).unwrap();
    let run = |company: &str| {
        let thread = db
            .graph(&["run", "memo", "--input", company, "--yes"])
            .current_dir(project.path())
            .without_model()
            .expect(0)
            .thread();
        let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
        std::path::PathBuf::from(state["values"]["dataroom"].as_str().unwrap())
    };
    assert_eq!(run("Acme"), rooms.join("acme"));
    let sample = run("Fernstone");
    assert!(
        sample.ends_with("examples/dataroom/fernstone"),
        "{sample:?}"
    );
    assert!(!sample.starts_with(project.path()), "{sample:?}");
    db.graph(&["run", "memo", "--input", "Nope", "--yes"])
        .current_dir(project.path())
        .without_model()
        .expect(2)
        .stderr_has(&["The data rooms there are for: acme, fernstone"]);
}
