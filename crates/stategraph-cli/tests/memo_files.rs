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
