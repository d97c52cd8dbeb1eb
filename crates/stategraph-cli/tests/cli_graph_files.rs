//! Graph files: `graph run NAME` uses `./graphs/NAME.toml` when there is one (else the built-in
//! copy) and says which; `graph graphs` shows each graph's source; an edit changes the next run;
//! a resume from another folder uses the file the run used.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{built_in_graph, Db, Project};

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

#[test]
fn a_garbled_graph_file_is_named_with_its_line_and_every_good_graph_is_still_listed() {
    let db = Db::new();
    let here = Project::new();
    // A local memo.toml with a broken table header (line 18), a broken file of no registered
    // name, and a good one configuring the pipeline.
    here.graph_file("memo", |built_in| {
        built_in.replacen("[settings]", "[settings", 1)
    });
    let graphs = here.path().join("graphs");
    std::fs::write(
        graphs.join("broken.toml"),
        "graph = \"pipeline\"\nrecursion_limit = = 3\n",
    )
    .unwrap();
    let quick = built_in_graph("pipeline").replace(
        "description = \"Keyless demo: outline a document, draft sections in parallel, pause for review, publish\"",
        "description = \"The pipeline, quicker\"",
    );
    std::fs::write(graphs.join("quick.toml"), quick).unwrap();

    let list = db.graph(&["graphs"]).current_dir(here.path()).expect(0);
    let names: Vec<&str> = (list.stdout.lines())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "agent",
            "brief",
            "pipeline",
            "research",
            "tree",
            "graphs/quick.toml"
        ],
        "{list}"
    );
    assert!(list.stdout.contains("The pipeline, quicker"), "{list}");
    list.stderr_has(&[
        "graphs/broken.toml:2: ",
        "graphs/memo.toml:18: ",
        "here uses graphs/memo.toml: mend it, or remove it to run the built-in copy",
    ]);

    let json = db
        .graph(&["graphs", "--json"])
        .current_dir(here.path())
        .expect(0)
        .json();
    let rows = json.as_array().unwrap();
    let bad: Vec<(&str, u64)> = (rows.iter())
        .filter(|g| g["error"].is_string())
        .map(|g| (g["source"].as_str().unwrap(), g["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        bad,
        [("graphs/memo.toml", 18), ("graphs/broken.toml", 2)],
        "{json:#}"
    );
    let memo = rows.iter().find(|g| g["name"] == "memo").unwrap();
    assert!(memo["nodes"].is_null(), "{memo:#}");
    assert_eq!(rows.len(), 8, "{json:#}");
}
