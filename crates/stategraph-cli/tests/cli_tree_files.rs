//! Task files as people's editors leave them, through the real `graph` binary against a
//! stand-in OpenAI-compatible server on 127.0.0.1: a child renamed with a space in its name,
//! linked the way Markdown editors write such a link (`fetch%20pages.md`), and a YAML front
//! matter block (`---` ... `---`, as Obsidian, Jekyll or Hugo write it) above the title. Both
//! are read as the task they are, by `graph tree` and by `graph solve`. A task folder that
//! cannot be written is named in the error, and the decomposition goes on once it can, without
//! asking the model again. No network, no key.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/small_fs.rs"]
mod small_fs;
#[path = "../../../tests/support/task_plans.rs"]
mod task_plans;

use fake_openai::{Call, FakeOpenAi};
use harness::{Db, TestCommand};
use std::path::{Path, PathBuf};
use task_plans::task_plan;

const ROOT: &str = "app.md";

fn respond(call: &Call) -> String {
    match call.kind.as_str() {
        "TaskPlan" => task_plan(
            &call.key,
            &[("fetch", "simple", &[]), ("parse", "simple", &["fetch.md"])],
        )
        .to_string(),
        "Solve" => format!("RESULT of {}", call.key),
        other => panic!("unexpected request {other}: {}", call.body),
    }
}

/// A store, a folder (with a space in its name) holding the example task, and the model.
struct Setup {
    db: Db,
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("my tasks")).unwrap();
        let example =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks/web_scraper.md");
        std::fs::copy(example, dir.path().join("my tasks").join(ROOT)).unwrap();
        Setup {
            db: Db::new(),
            dir,
            server: FakeOpenAi::answering(respond),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join("my tasks").join(rel)
    }

    fn graph(&self, command: &str) -> TestCommand {
        let root = self.path(ROOT).display().to_string();
        (self.db.graph(&[command, &root])).with_model_at(&self.server.base_url())
    }
}

#[test]
fn a_renamed_child_linked_with_percent_20_and_a_front_matter_block_are_read_as_tasks() {
    let s = Setup::new();
    s.graph("decompose").expect(3);
    // The person renames `fetch.md`, gives it front matter, and links it as an editor does.
    std::fs::remove_file(s.path("app_children/fetch.md")).unwrap();
    std::fs::write(
        s.path("app_children/fetch pages.md"),
        "---\ntags: [scraper, network]\nowner: sam\n---\n\n# Fetch pages\n\n## Type\nsimple\n\n\
         ## Summary\nDownload each URL politely.\n",
    )
    .unwrap();
    let parse = std::fs::read_to_string(s.path("app_children/parse.md")).unwrap();
    assert!(parse.contains("(fetch.md)"), "{parse}");
    std::fs::write(
        s.path("app_children/parse.md"),
        parse.replace("(fetch.md)", "(fetch%20pages.md)"),
    )
    .unwrap();

    let tree = s.graph("tree").expect(0);
    assert!(!tree.stdout.contains("warnings"), "{tree}");
    assert!(
        tree.stdout
            .contains("fetch pages.md [simple] Fetch pages: Download each URL politely."),
        "{tree}"
    );
    assert!(
        tree.stdout.contains("(after: app_children/fetch pages.md)"),
        "{tree}"
    );

    s.graph("solve").expect(0);
    let solved = s.server.keys("Solve");
    assert_eq!(
        solved,
        [
            "app_children/fetch pages.md",
            "app_children/parse.md",
            "app.md"
        ],
        "the renamed task first, then what needs it"
    );
}

#[test]
fn a_read_only_task_folder_is_named_and_decompose_goes_on_once_it_can_write() {
    small_fs::with_small_fs(
        "a_read_only_task_folder_is_named_and_decompose_goes_on_once_it_can_write",
        "8m",
        |disk| {
            let db = Db::new();
            let server = FakeOpenAi::answering(respond);
            let example =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks/web_scraper.md");
            std::fs::copy(example, disk.join(ROOT)).unwrap();
            let root = disk.join(ROOT).display().to_string();
            let decompose = || {
                db.graph(&["decompose", &root])
                    .with_model_at(&server.base_url())
            };
            let mount = |how: &str| {
                let status = std::process::Command::new("mount")
                    .args(["-o", how])
                    .arg(disk)
                    .status()
                    .expect("mount");
                assert!(status.success(), "mount -o {how} failed");
            };
            mount("remount,ro");
            let out = decompose().expect(1);
            out.stderr_has(&[
                &format!("cannot create {}/app_children", disk.display()),
                "Read-only file system",
                "graph decompose",
            ]);
            mount("remount,rw");
            decompose().expect(3);
            assert!(disk.join("app_children/parse.md").is_file());
            assert_eq!(
                server.keys("TaskPlan"),
                ["app.md"],
                "the decomposition the model wrote once is not asked for again"
            );
        },
    );
}

#[test]
fn a_result_changed_in_a_plan_file_is_pointed_out_since_nothing_reads_it_back() {
    let s = Setup::new();
    s.graph("decompose").expect(3);
    s.graph("solve").expect(0);
    let plan = s.path("app_children/fetch_plan.md");
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("RESULT of app_children/fetch.md"), "{text}");
    std::fs::write(
        &plan,
        text.replace(
            "RESULT of app_children/fetch.md",
            "A better result, by hand.",
        ),
    )
    .unwrap();
    let tree = s.graph("tree").expect(0);
    assert!(
        tree.stdout.contains(
            "app_children/fetch_plan.md: its `## Result` was changed since app_children/fetch.md was solved"
        ),
        "{tree}"
    );
    assert!(
        tree.stdout.contains("edit app_children/fetch.md itself"),
        "{tree}"
    );
    assert_eq!(
        tree.stdout.matches("was changed since").count(),
        1,
        "the other plan files are as solve wrote them: {tree}"
    );
    s.graph("solve")
        .expect(0)
        .stderr_has(&["warning: app_children/fetch_plan.md: its `## Result` was changed"]);
    // The person's text is kept as they wrote it.
    assert!(std::fs::read_to_string(&plan)
        .unwrap()
        .contains("A better result, by hand."));
}
