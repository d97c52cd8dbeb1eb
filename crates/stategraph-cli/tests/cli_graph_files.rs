//! Graph files: `graph run NAME` uses `./graphs/NAME.toml` when there is one (else the built-in
//! copy) and says which; `graph graphs` shows each graph's source; an edit changes the next run;
//! a resume from another folder uses the file the run used.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Project};

/// A project folder with its own `graphs/pipeline.toml`, titled `title`.
fn project(title: &str) -> Project {
    let project = Project::new();
    write_title(&project, title);
    project
}

fn write_title(project: &Project, title: &str) {
    project.graph_file("pipeline", |built_in| {
        let text = built_in.replace(
            "title = \"A short guide to {topic}\"",
            &format!("title = \"{title}\""),
        );
        assert_ne!(text, built_in, "the built-in file has a title line");
        text
    });
}

#[test]
fn a_local_graph_file_is_used_named_and_listed_and_its_edits_change_the_next_run() {
    let db = Db::new();
    let here = project("Local notes on {topic}");
    let run = || db.run_pipeline(1, &["--yes"]).current_dir(here.path());
    let first = run().expect(0);
    first.stderr_has(&["graph pipeline from graphs/pipeline.toml"]);
    assert!(first.stdout.starts_with("# Local notes on sled"), "{first}");

    write_title(&here, "Edited notes on {topic}");
    let second = run().expect(0);
    assert!(
        second.stdout.starts_with("# Edited notes on sled"),
        "{second}"
    );

    let list = db.graph(&["graphs"]).current_dir(here.path()).expect(0);
    let line = |name: &str| {
        list.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}\n{list}"))
            .to_string()
    };
    assert!(
        line("pipeline").ends_with("[graphs/pipeline.toml]"),
        "{list}"
    );
    assert!(line("research").ends_with("[built-in]"), "{list}");
    let json = db
        .graph(&["graphs", "--json"])
        .current_dir(here.path())
        .expect(0)
        .json();
    let pipeline = json
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "pipeline")
        .unwrap();
    assert_eq!(pipeline["source"], "graphs/pipeline.toml");

    // Elsewhere, the built-in copy.
    let elsewhere = tempfile::tempdir().unwrap();
    let plain = db
        .run_pipeline(1, &["--yes"])
        .current_dir(elsewhere.path())
        .expect(0);
    plain.stderr_has(&["graph pipeline (built-in graph file)"]);
    assert!(
        plain.stdout.starts_with("# A short guide to sled"),
        "{plain}"
    );
}

#[test]
fn a_resume_from_another_folder_uses_the_file_the_run_used() {
    let db = Db::new();
    let here = project("Local notes on {topic}");
    let paused = db.run_pipeline(1, &[]).current_dir(here.path()).expect(3);
    let thread = paused.thread();
    let elsewhere = tempfile::tempdir().unwrap();
    let done = db
        .graph(&["resume", &thread, "--resume", "yes"])
        .current_dir(elsewhere.path())
        .expect(0);
    assert!(done.stdout.starts_with("# Local notes on sled"), "{done}");
}
