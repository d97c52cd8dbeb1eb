//! Bad input gets a clear error (exit 2) and changes nothing: `--set` checked against the
//! graph's settings, a missing input, `run --thread` of a thread that exists.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Project};

#[test]
fn an_unknown_setting_is_refused_with_the_nearest_known_one_and_no_thread() {
    let db = Db::new();
    let out = db
        .graph(&["run", "pipeline", "--input", "sled", "--set", "step_mss=1"])
        .expect(2);
    out.stderr_has(&[
        "--set step_mss=1",
        "no setting `step_mss`",
        "did you mean `step_ms`?",
    ]);
    // A research setting given without its table, before any model is needed.
    db.graph(&["run", "research", "--input", "q", "--set", "corpus=docs"])
        .without_model()
        .expect(2)
        .stderr_has(&["did you mean `search.corpus`?"]);
    db.graph(&[
        "run",
        "pipeline",
        "--input",
        "x",
        "--set",
        "recursion_limt=3",
    ])
    .expect(2)
    .stderr_has(&["no setting `recursion_limt`"]);
    assert!(db.thread_ids().is_empty());
}

#[test]
fn a_setting_of_the_wrong_type_names_the_key_and_the_type_it_expects() {
    let db = Db::new();
    let cases = [
        (
            "step_ms=abc",
            "setting `step_ms` expects a whole number of 0 or more, not the text \"abc\"",
        ),
        (
            "sections=5",
            "setting `sections` expects a list of texts, not the integer 5",
        ),
        ("yes=maybe", "setting `yes` expects true or false"),
        (
            "durability=sometimes",
            "setting `durability` expects one of \"sync\", \"async\", \"exit\"",
        ),
        (
            "recursion_limit=-1",
            "setting `recursion_limit` expects a whole number",
        ),
        (
            "settings=5",
            "setting `settings` expects a table, not the integer 5",
        ),
    ];
    for (set, message) in cases {
        db.graph(&["run", "pipeline", "--input", "sled", "--set", set])
            .expect(2)
            .stderr_has(&[message]);
    }
    db.graph(&[
        "run",
        "research",
        "--input",
        "q",
        "--set",
        "search.provider=bing",
    ])
    .without_model()
    .expect(2)
    .stderr_has(&["`search.provider` expects one of \"auto\", \"web\", \"corpus\""]);
    db.graph(&[
        "run",
        "research",
        "--input",
        "q",
        "--set",
        "limits.max_todos=many",
    ])
    .without_model()
    .expect(2)
    .stderr_has(&["`limits.max_todos` expects a whole number"]);
    assert!(db.thread_ids().is_empty());
    // Well-typed settings still run.
    db.graph(&[
        "run",
        "pipeline",
        "--input",
        "sled",
        "--yes",
        "--set",
        "step_ms=1",
        "--set",
        "sections=[\"Only {topic}\"]",
    ])
    .expect(0);
}

#[test]
fn a_resume_with_a_bad_setting_changes_nothing() {
    let db = Db::new();
    let thread = db.paused_thread();
    db.graph(&[
        "resume",
        &thread,
        "--resume",
        "yes",
        "--set",
        "step_ms=slow",
    ])
    .expect(2)
    .stderr_has(&["`step_ms` expects"]);
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["values"]["approved"], false, "{state:#}");
    db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
}

#[test]
fn a_run_without_the_input_its_graph_needs_is_refused_and_makes_no_thread() {
    let db = Db::new();
    db.graph(&["run", "pipeline", "--yes", "--set", "step_ms=1"])
        .expect(2)
        .stderr_has(&["graph `pipeline` needs an input", "--input TEXT"]);
    db.graph(&["run", "pipeline", "--input", "  "])
        .expect(2)
        .stderr_has(&["needs an input"]);
    db.graph(&["run", "pipeline", "--input-json", "{\"title\": \"T\"}"])
        .expect(2)
        .stderr_has(&["needs an input"]);
    db.graph(&["run", "research"])
        .without_model()
        .expect(2)
        .stderr_has(&["graph `research` needs an input"]);
    assert!(db.thread_ids().is_empty());
}

#[test]
fn run_with_the_id_of_a_thread_that_exists_points_to_resume_and_fork() {
    let db = Db::new();
    let thread = db.paused_thread();
    let before = db.graph(&["state", &thread, "--json"]).expect(0).json();
    db.graph(&[
        "run", "pipeline", "--input", "other", "--thread", &thread, "--yes",
    ])
    .expect(2)
    .stderr_has(&[
        &format!("thread `{thread}` already exists"),
        &format!("resume {thread}"),
        &format!("fork {thread}"),
    ]);
    let after = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(before, after, "the existing thread was changed");
    assert_eq!(db.thread_ids(), vec![thread]);
}

#[test]
fn prune_keep_0_is_refused_and_says_what_to_use_instead() {
    let db = Db::new();
    let thread = db.finished_thread();
    db.graph(&["prune", "--keep", "0"]).expect(2).stderr_has(&[
        "--keep 0",
        "keep at least 1",
        "graph delete",
    ]);
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert!(history.as_array().unwrap().len() > 1, "nothing was pruned");
}

/// A project folder whose `graphs/research.toml` is the built-in one changed by `edit`.
fn research_file(edit: impl Fn(&str) -> String) -> Project {
    let project = Project::new();
    project.graph_file("research", |built_in| {
        let text = edit(built_in);
        assert_ne!(text, built_in, "the edit changed the file");
        text
    });
    project
}

#[test]
fn graph_file_mistakes_and_a_pointless_yes_are_named_in_the_users_words() {
    let db = Db::new();
    // A typo'd table at the top of the file: the setting it most likely meant.
    let typo = research_file(|t| t.replace("[settings.limits]", "[limts]"));
    let out = db
        .graph(&["run", "research", "--input", "q"])
        .current_dir(typo.path())
        .without_model()
        .expect(2);
    out.stderr_has(&[
        "graphs/research.toml",
        "no key `limts` at the top of a graph file",
        "did you mean `settings.limits`?",
    ]);
    assert!(!out.stderr.contains("unknown field"), "{out}");
    // A pricing table missing a key: the key and the file, not serde's wording.
    let partial = research_file(|t| format!("{t}\n[settings.pricing]\ninput_per_million = 1.5\n"));
    let out = db
        .graph(&["run", "research", "--input", "q"])
        .current_dir(partial.path())
        .without_model()
        .expect(2);
    out.stderr_has(&[
        "graphs/research.toml",
        "`pricing` needs `output_per_million` too",
    ]);
    assert!(!out.stderr.contains("missing field"), "{out}");
    // --yes on a graph with no review: says so, not "--set yes=true".
    let out = db
        .graph(&["run", "tree", "--input", "q", "--yes"])
        .without_model()
        .expect(2);
    out.stderr_has(&["--yes", "graph `tree` has no review to approve"]);
    assert!(!out.stderr.contains("yes=true"), "{out}");
    assert!(db.thread_ids().is_empty());
}

/// Fails the test when `text` has serde's words for a value that does not fit.
fn assert_no_serde_words(out: &harness::Output) {
    for words in [
        "invalid type",
        "unknown field",
        "expected one of",
        "a sequence",
        "struct ",
    ] {
        assert!(
            !out.stderr.contains(words),
            "serde's {words:?} leaked\n{out}"
        );
    }
}

#[test]
fn input_json_that_does_not_fit_the_state_names_the_flag_the_field_and_its_type() {
    let db = Db::new();
    let cases: [(&str, &[&str]); 5] = [
        (
            r#"{"topics": "sled"}"#,
            &[
                "no field `topics`",
                "did you mean `topic`?",
                "its fields: topic, title, outline",
            ],
        ),
        (
            r#"{"topic": 5}"#,
            &["field `topic` expects a text, not the integer 5"],
        ),
        (
            r#"{"topic": "sled", "outline": "One"}"#,
            &["field `outline` expects a list of texts, not the text \"One\""],
        ),
        (
            r#"{"topic": "sled", "outline": ["One", 2]}"#,
            &["field `outline` expects a list of texts: at [1], the integer 2 is not a text"],
        ),
        (
            r#"["sled"]"#,
            &[
                "give a JSON object of the state's fields (topic, title",
                "not a list",
            ],
        ),
    ];
    for (json, needles) in cases {
        let out = db
            .graph(&["run", "pipeline", "--input-json", json])
            .expect(2);
        out.stderr_has(&["--input-json does not fit the state"])
            .stderr_has(needles);
        assert_no_serde_words(&out);
    }
    let file = db.path().join("input.json");
    std::fs::write(&file, r#"{"topic": "sled", "revisions": -1}"#).unwrap();
    let out = db
        .graph(&["run", "pipeline", "--input-file", file.to_str().unwrap()])
        .expect(2);
    out.stderr_has(&[
        &format!("--input-file {} does not fit the state", file.display()),
        "field `revisions` expects a whole number, not the integer -1",
    ]);
    assert_no_serde_words(&out);
    assert!(db.thread_ids().is_empty());
}

#[test]
fn set_json_that_does_not_fit_the_state_names_the_flag_the_field_and_its_type() {
    let db = Db::new();
    let thread = db.paused_thread();
    let before = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let cases: [(&str, &[&str]); 4] = [
        (
            r#"{"topics": 1}"#,
            &["no field `topics`", "did you mean `topic`?"],
        ),
        (
            r#"{"revisions": "many"}"#,
            &["field `revisions` expects a whole number, not the text \"many\""],
        ),
        (
            r#"{"approved": "yes"}"#,
            &["field `approved` expects true or false, not the text \"yes\""],
        ),
        (
            r#"{"outline": {"$overwrite": [1]}}"#,
            &["field `outline` expects a list of texts: at [0], the integer 1 is not a text"],
        ),
    ];
    for (json, needles) in cases {
        let out = db.graph(&["update", &thread, "--set-json", json]).expect(2);
        out.stderr_has(&["--set-json does not fit the state"])
            .stderr_has(needles);
        assert_no_serde_words(&out);
    }
    let after = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(before, after, "a refused edit changed the thread");
}

/// A change to a graph file's text.
type Edit = fn(&str) -> String;

#[test]
fn graph_file_values_of_the_wrong_type_are_refused_in_the_users_words_before_a_thread_exists() {
    let db = Db::new();
    let cases: [(Edit, &str); 4] = [
        (
            |t| t.replace("recursion_limit = 400", "recursion_limit = \"many\""),
            "setting `recursion_limit` expects a whole number of 1 or more, not the text \"many\"",
        ),
        (
            |t| t.replace("durability = \"sync\"", "durability = \"always\""),
            "setting `durability` expects one of \"sync\", \"async\", \"exit\"",
        ),
        (
            |t| t.replace("max_todos = 12", "max_todos = \"twelve\""),
            "setting `limits.max_todos` expects a whole number of 0 or more, not the text \"twelve\"",
        ),
        (
            |t| t.replace("max_todos = 12", "max_todo = 12"),
            "there is no setting `limits.max_todo`; did you mean `limits.max_todos`?",
        ),
    ];
    for (edit, message) in cases {
        let project = research_file(edit);
        let out = db
            .graph(&["run", "research", "--input", "q"])
            .current_dir(project.path())
            .without_model()
            .expect(2);
        out.stderr_has(&["graphs/research.toml", message]);
        assert_no_serde_words(&out);
        assert!(!out.stderr.contains("expected u64"), "{out}");
    }
    assert!(db.thread_ids().is_empty());
}

#[test]
fn recursion_limit_0_is_refused_before_a_thread_is_made_naming_the_flag_to_use() {
    let db = Db::new();
    db.graph(&[
        "run",
        "pipeline",
        "--input",
        "sled",
        "--set",
        "recursion_limit=0",
    ])
    .expect(2)
    .stderr_has(&[
        "setting `recursion_limit` expects a whole number of 1 or more, not the integer 0",
        "--set recursion_limit=N with N ≥ 1",
    ]);
    assert!(db.thread_ids().is_empty());
    // A limit of 1 is a limit, not a mistake.
    db.graph(&[
        "run",
        "pipeline",
        "--input",
        "sled",
        "--yes",
        "--set",
        "step_ms=1",
        "--set",
        "recursion_limit=1",
    ])
    .expect(1)
    .stderr_has(&["--set recursion_limit=2"]);
}

#[test]
fn history_limit_0_is_refused_and_says_what_to_use_instead() {
    let db = Db::new();
    let thread = db.finished_thread();
    db.graph(&["history", &thread, "--limit", "0"])
        .expect(2)
        .stderr_has(&["--limit 0", "--limit N with N ≥ 1"]);
    let one = db
        .graph(&["history", &thread, "--limit", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(one.as_array().unwrap().len(), 1);
}

#[test]
fn a_usage_error_shows_only_the_options_typed_not_those_from_the_environment() {
    let db = Db::new();
    let out = harness::TestCommand::bare(&["run", "pipeline", "--input", "sled", "-q", "-v"])
        .env("GRAPH_DB", db.path())
        .env("GRAPH_OUT", db.out())
        .expect(2);
    out.stderr_has(&["'--quiet' cannot be used with '--verbose", "Usage: "]);
    let usage = out
        .stderr
        .lines()
        .find(|l| l.starts_with("Usage: "))
        .unwrap();
    assert!(
        !usage.contains("--db") && !usage.contains("--out"),
        "GRAPH_DB and GRAPH_OUT were not typed\n{out}"
    );
}

#[test]
fn a_huge_value_is_quoted_cut_in_messages_never_whole() {
    let db = Db::new();
    let input = db.path().join("big.json");
    let company = "Fern".repeat(1_300_000);
    std::fs::write(
        &input,
        serde_json::json!({ "company": company }).to_string(),
    )
    .unwrap();
    let out = db
        .graph(&[
            "run",
            "memo",
            "--input-file",
            input.to_str().unwrap(),
            "--yes",
        ])
        .without_model()
        .output();
    assert_ne!(
        out.code,
        Some(0),
        "{}",
        &out.stderr[..out.stderr.len().min(2_000)]
    );
    let said = format!("\"{}…\" (5.2 MB)", "Fern".repeat(10));
    assert!(
        out.stderr.contains(&said),
        "{}",
        &out.stderr[..out.stderr.len().min(2_000)]
    );
    assert!(
        out.stderr.len() < 10_000,
        "{} bytes on stderr",
        out.stderr.len()
    );
    // A setting's value, as long as a command line takes.
    let long = format!("step_ms={}", "slow".repeat(25_000));
    let out = db
        .graph(&["run", "pipeline", "--input", "sled", "--set", &long])
        .expect(2);
    out.stderr_has(&[&format!(
        "not the text \"{}…\" (100.0 KB)",
        "slow".repeat(10)
    )]);
    assert!(
        out.stderr.len() < 10_000,
        "{} bytes on stderr",
        out.stderr.len()
    );
    // A pause's question shows the fields it carries, one made of the input: cut.
    let topic = db.path().join("topic.json");
    std::fs::write(
        &topic,
        serde_json::json!({ "topic": "x".repeat(300_000) }).to_string(),
    )
    .unwrap();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input-file",
            topic.to_str().unwrap(),
            "--set",
            "step_ms=1",
        ])
        .expect(3);
    out.stderr_has(&["title: A short guide to xxx", "… (300.0 KB)"]);
    assert!(
        out.stderr.len() < 10_000,
        "{} bytes on stderr",
        out.stderr.len()
    );
}
