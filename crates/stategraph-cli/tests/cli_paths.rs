//! Relative paths in settings are read against the folder a run starts in and kept absolute with
//! the thread, so `graph resume` from another folder reads the same files: a research corpus and
//! workspace (paused at the plan review, resumed elsewhere) and a memo's data room (killed with
//! SIGKILL mid-run, resumed elsewhere). Real processes, a stand-in model server, no network.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::FakeOpenAi;
use harness::Db;
use serde_json::json;
use std::path::Path;

/// Two sibling folders: where the run starts (`a`) and where it is resumed (`b`).
fn two_folders() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (root, a, b)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_research_run_with_a_relative_corpus_and_workspace_resumes_from_another_folder() {
    let (_root, a, b) = two_folders();
    std::fs::create_dir_all(a.join("docs")).unwrap();
    std::fs::write(
        a.join("docs").join("sled.md"),
        "# Sled durability\n\nsled makes writes durable when its log is flushed with fsync.",
    )
    .unwrap();
    let server = FakeOpenAi::start(
        json!({"todos": [{"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []}]}),
        |_| json!({"task_outcome": "answered", "status": "done", "new_tasks": []}),
    );
    let db = Db::new();
    let graph = |args: &[&str], dir: &Path| {
        db.graph(args)
            .with_model_at(&server.base_url())
            .current_dir(dir)
    };
    let paused = graph(
        &[
            "run",
            "research",
            "--input",
            "How does sled make writes durable?",
            "--set",
            "search.corpus=docs",
            "--set",
            "workspace=./ws",
        ],
        &a,
    )
    .expect(3);
    let thread = paused.thread();

    // From b, where there is no `docs` (a relative corpus would be refused there at once).
    let done = graph(&["resume", &thread, "--resume", "approve"], &b).expect(0);
    assert!(done.stdout.contains("Sources:"), "{done}");
    assert!(
        done.stdout.contains("sled.md"),
        "the corpus in a was searched\n{done}"
    );
    assert!(
        !b.join("ws").exists() && !b.join("docs").exists(),
        "nothing made in b"
    );
}

#[test]
fn a_memo_killed_mid_run_with_a_relative_data_room_resumes_from_another_folder() {
    let (_root, a, b) = two_folders();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom/fernstone");
    copy_dir(&sample, &a.join("rooms").join("fernstone"));
    let db = Db::new();
    let memo = |args: &[&str], dir: &Path| db.graph(args).without_model().current_dir(dir);
    let mut running = memo(
        &[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            "dataroom=rooms",
            "--set",
            "stage_ms=1000",
            "--set",
            "web=false",
        ],
        &a,
    )
    .spawn();
    let thread = running.thread();
    // Past the stage that reads the deck from the data room, before the ones that read it again.
    running.wait_for("checkpoint saved; next: research\n");
    running.signal(libc::SIGKILL);
    running.finish();

    let done = memo(&["resume", &thread, "--set", "stage_ms=0"], &b).expect(0);
    assert!(done.stdout.contains("Fernstone"), "{done}");
    let room = a.join("rooms").join("fernstone");
    assert!(
        done.stdout.contains(&room.display().to_string()),
        "its sources are the files in a's data room\n{done}"
    );
}

#[test]
fn a_data_room_given_from_home_as_zsh_users_quote_it_is_read_from_home() {
    let home = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom/fernstone");
    copy_dir(&sample, &home.path().join("rooms").join("fernstone"));
    let db = Db::new();
    // `--set 'dataroom=~/rooms'`: quoted, so no shell expanded the `~`.
    let done = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            "dataroom=~/rooms",
            "--set",
            "web=false",
        ])
        .without_model()
        .env("HOME", home.path())
        .expect(0);
    let room = home.path().join("rooms").join("fernstone");
    assert!(
        done.stdout.contains(&room.display().to_string()),
        "its sources are the files in ~/rooms\n{done}"
    );
}
