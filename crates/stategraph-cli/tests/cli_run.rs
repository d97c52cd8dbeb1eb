//! `graph run` and `graph resume`: outcomes, exit codes, graph files, overrides, bad input.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;

#[test]
fn a_run_pauses_for_review_with_exit_3_and_says_how_to_continue() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "durable agents",
            "--set",
            "step_ms=1",
        ])
        .expect(3);
    let thread = out.thread();
    out.stderr_has(&[
        "`review` asks",
        "Publish this document?",
        &format!("graph resume {thread}"),
        "--resume <ANSWER>",
    ]);
    assert!(
        out.stdout.is_empty(),
        "a pause prints nothing on stdout\n{out}"
    );

    let done = db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
    assert!(
        done.stdout.starts_with("# A short guide to durable agents"),
        "{done}"
    );
    assert!(
        done.stdout.contains("## How durable agents works"),
        "{done}"
    );
}

#[test]
fn notes_instead_of_yes_send_the_draft_back_and_pause_again() {
    let db = Db::new();
    let thread = db.paused_thread();
    db.graph(&["resume", &thread, "--resume", "shorter please"])
        .expect(3);
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["values"]["revisions"], 1);
    assert!(state["values"]["sections"][0]["body"]
        .as_str()
        .unwrap()
        .contains("Revised: shorter please"));
    db.graph(&["resume", &thread, "--resume-json", "true"])
        .expect(0);
}

#[test]
fn yes_skips_the_review_pause() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0);
    assert!(out.stdout.contains("# A short guide to sled"), "{out}");
}

#[test]
fn json_output_is_exactly_one_document() {
    let db = Db::new();
    let paused = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--set",
            "step_ms=1",
            "--json",
        ])
        .expect(3)
        .json();
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["interrupts"][0]["node"], "review");
    let thread = paused["thread_id"].as_str().unwrap().to_string();
    assert!(paused["continue_with"]
        .as_str()
        .unwrap()
        .contains(&format!("resume {thread}")));

    let done = db
        .graph(&["resume", &thread, "--resume", "yes", "--json"])
        .expect(0)
        .json();
    assert_eq!(done["status"], "done");
    assert_eq!(
        done["state"]["log"],
        serde_json::json!(["outline", "draft 0", "draft 1", "draft 2", "review", "publish"])
    );

    // Every command's --json output parses as one document, also on failure.
    for args in [
        vec!["threads", "--json"],
        vec!["state", &thread, "--json"],
        vec!["history", &thread, "--json"],
        vec!["graphs", "--json"],
    ] {
        db.graph(&args).expect(0).json();
    }
    let failed = db
        .graph(&["state", "no-such-thread", "--json"])
        .expect(2)
        .json();
    assert_eq!(failed["error"]["exit_code"], 2);
}

#[test]
fn input_comes_as_text_json_or_a_file() {
    let db = Db::new();
    let json = db
        .graph(&[
            "run",
            "pipeline",
            "--input-json",
            r#"{"topic": "json"}"#,
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0);
    assert!(json.stdout.contains("guide to json"));
    let file = db.path().join("input.json");
    std::fs::write(&file, r#"{"topic": "a file"}"#).unwrap();
    let from_file = db
        .graph(&[
            "run",
            "pipeline",
            "--input-file",
            file.to_str().unwrap(),
            "--yes",
            "--set",
            "step_ms=1",
        ])
        .expect(0);
    assert!(from_file.stdout.contains("guide to a file"));
}

#[test]
fn set_overrides_settings_and_limits_and_is_kept_for_resume() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--set",
            "step_ms=1",
            "--set",
            r#"sections=["Only {topic}"]"#,
            "--set",
            "title=On {topic}",
        ])
        .expect(3);
    let thread = out.thread();
    let done = db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
    assert_eq!(done.stdout.trim_end(), "# On x\n\n## Only x\n\nOnly x: a plain account for engineers, with one example and one pitfall.");

    // Three supersteps are not enough for this graph: a clear failure, resumable.
    let limited = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--set",
            "step_ms=1",
            "--set",
            "recursion_limit=2",
        ])
        .expect(1);
    limited.stderr_has(&[
        "recursion limit of 2",
        "continue with",
        "graph resume",
        "with a higher limit:",
        "--set recursion_limit=4",
    ]);
    let thread = limited.thread();
    db.graph(&["resume", &thread, "--set", "recursion_limit=20"])
        .expect(0);
}

#[test]
fn a_graph_file_path_configures_a_registered_graph() {
    let db = Db::new();
    let file = db.path().join("short.toml");
    std::fs::write(
        &file,
        "graph = \"pipeline\"\ndescription = \"one section\"\n[settings]\nstep_ms = 1\nyes = true\nsections = [\"All of {topic}\"]\ntitle = \"{topic}\"\n",
    )
    .unwrap();
    let out = db
        .graph(&["run", file.to_str().unwrap(), "--input", "it"])
        .expect(0);
    assert!(out.stdout.starts_with("# it\n\n## All of it"), "{out}");
    // Resume finds the same file again (the thread remembers its absolute path).
    let thread = out.thread();
    db.graph(&["resume", &thread]).expect(0);
}

#[test]
fn a_graph_file_with_an_unknown_key_is_refused_naming_key_and_file() {
    let db = Db::new();
    let file = db.path().join("typo.toml");
    std::fs::write(&file, "graph = \"pipeline\"\nrecursion_limt = 5\n").unwrap();
    let out = db
        .graph(&["run", file.to_str().unwrap(), "--input", "x"])
        .expect(2);
    out.stderr_has(&["typo.toml", "recursion_limt"]);
    assert!(
        !db.path().join("threads").exists(),
        "nothing was created\n{out}"
    );
}

#[test]
fn breakpoints_from_the_command_line_pause_and_resume() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--set",
            "step_ms=1",
            "--interrupt-before",
            "publish",
        ])
        .expect(3);
    out.stderr_has(&["breakpoint before `publish`"]);
    let thread = out.thread();
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], serde_json::json!(["publish"]));
    assert_eq!(state["status"], "paused");
    db.graph(&["resume", &thread]).expect(0);
}

#[test]
fn bad_input_is_refused_with_exit_2_and_changes_nothing() {
    let db = Db::new();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["run", "nosuch"],
            vec!["no graph named `nosuch`", "pipeline"],
        ),
        (
            vec!["run", "missing.toml"],
            vec!["cannot read graph file missing.toml"],
        ),
        (
            vec!["run", "pipeline", "--input-json", "{\"topic\": \"x\",,}"],
            vec!["not valid JSON", "line 1 column 15"],
        ),
        (
            vec!["run", "pipeline", "--input-json", "{\"topic\": 5}"],
            vec![
                "--input-json",
                "field `topic` expects a text, not the integer 5",
            ],
        ),
        (
            vec!["run", "pipeline", "--input-json", "{\"topics\": \"x\"}"],
            vec!["--input-json", "no field `topics`", "did you mean `topic`?"],
        ),
        (
            vec![
                "run",
                "pipeline",
                "--input",
                "x",
                "--interrupt-before",
                "reveiw",
            ],
            vec!["no node named `reveiw`", "outline, draft, review, publish"],
        ),
        (
            vec![
                "run",
                "pipeline",
                "--input",
                "x",
                "--set",
                "durability=sometimes",
            ],
            vec!["sometimes"],
        ),
        (
            vec!["run", "pipeline", "--input", "x", "--set", "novalue"],
            vec!["expected KEY=VALUE"],
        ),
        (
            vec!["run", "pipeline", "--input", "x", "--thread", "a/b"],
            vec!["invalid thread id"],
        ),
        (
            vec!["run", "pipeline", "--input", "x", "--thread", ".."],
            vec!["invalid thread id"],
        ),
        (
            vec!["run", "pipeline", "--input", "x", "--input-json", "{}"],
            vec!["cannot be used with"],
        ),
        (vec!["frobnicate"], vec!["unrecognized subcommand"]),
    ];
    for (args, needles) in cases {
        db.graph(&args).expect(2).stderr_has(&needles);
    }
    assert!(
        !db.path().join("threads").exists(),
        "bad input created a thread"
    );
}

#[test]
fn resume_refuses_answers_nothing_waits_for() {
    let db = Db::new();
    let thread = db.finished_thread();
    db.graph(&["resume", &thread, "--resume", "yes"])
        .expect(2)
        .stderr_has(&["no pending interrupt"]);
    // A done thread resumes to done without running anything.
    let again = db.graph(&["resume", &thread]).expect(0);
    assert!(!again.stderr.contains("started"), "{again}");
    let paused = db.paused_thread();
    db.graph(&["resume", &paused, "--resume-json", "[1,"])
        .expect(2)
        .stderr_has(&["--resume-json is not valid JSON"]);
}

/// Listing and drawing the binary's graphs read no thread, so they open no store: a database
/// nobody listens on, or a key that is not one, does not stop them, while a command that reads
/// threads says what is wrong with each.
#[test]
fn graphs_and_draw_open_no_store() {
    let down = "postgres://graph@127.0.0.1:1/threads";
    let graphs = harness::TestCommand::bare(&["graphs"])
        .env("GRAPH_DB", down)
        .expect(0);
    assert!(graphs.stdout.contains("pipeline"), "{graphs}");
    let drawn = harness::TestCommand::bare(&["draw", "pipeline"])
        .env("GRAPH_DB", down)
        .expect(0);
    assert!(drawn.stdout.contains("outline"), "{drawn}");
    harness::TestCommand::bare(&["threads"])
        .env("GRAPH_DB", down)
        .expect(1)
        .stderr_has(&["cannot reach Postgres at 127.0.0.1:1"]);

    let db = Db::new();
    let bad_key = |args: &[&str]| db.graph(args).env("GRAPH_ENCRYPTION_KEY", "not a key");
    bad_key(&["graphs", "--json"]).expect(0).json();
    bad_key(&["draw", "pipeline", "--format", "dot"]).expect(0);
    bad_key(&["threads"])
        .expect(2)
        .stderr_has(&["GRAPH_ENCRYPTION_KEY"]);
    // An unknown graph is still refused, with the graphs there are.
    harness::TestCommand::bare(&["draw", "no-such-graph"])
        .env("GRAPH_DB", down)
        .expect(2)
        .stderr_has(&["no-such-graph"]);
}

#[test]
fn help_and_version_exit_0() {
    let help = harness::TestCommand::bare(&["--help"]).expect(0);
    for command in [
        "run", "resume", "threads", "state", "history", "update", "fork", "rerun", "delete",
        "prune", "graphs", "draw",
    ] {
        assert!(
            help.stdout.contains(command),
            "help lacks {command}\n{help}"
        );
    }
    assert!(help.stdout.contains("3 paused"), "{help}");
    harness::TestCommand::bare(&["--version"]).expect(0);
}

/// The option names of one section of a help text (`Options:`, `Global options:`), in order.
fn options_under(help: &str, heading: &str) -> Vec<String> {
    (help.lines())
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let l = l.trim_start();
            let flag = l
                .strip_prefix("-")
                .filter(|_| !l.starts_with("--"))
                .map(|_| &l[4..]);
            flag.unwrap_or(l)
                .split_whitespace()
                .next()
                .filter(|w| w.starts_with("--"))
                .map(|w| w.trim_end_matches('.').to_string())
        })
        .collect()
}

#[test]
fn run_help_says_what_run_does_with_its_input_options_together_and_the_global_ones_last() {
    let db = Db::new();
    let help = db.graph(&["run", "--help"]).expect(0).stdout;
    // What `--thread` says is what a run does with an id that exists.
    assert!(!help.contains("continues with the input"), "{help}");
    assert!(
        help.contains("A thread of that id is refused: continue it with `resume`"),
        "{help}"
    );
    db.run_pipeline(1, &["--yes", "--thread", "t1"]).expect(0);
    db.run_pipeline(1, &["--yes", "--thread", "t1"])
        .expect(2)
        .stderr_has(&["thread `t1` already exists: continue it with"]);
    // The input options first and together; the options of every command after the command's.
    let own = options_under(&help, "Options:");
    assert_eq!(
        own[..4],
        ["--input", "--input-json", "--input-file", "--thread"],
        "{help}"
    );
    assert!(
        !own.iter().any(|o| o == "--db" || o == "--verbose"),
        "{help}"
    );
    assert_eq!(
        options_under(&help, "Global options:"),
        ["--db", "--verbose", "--quiet"],
        "{help}"
    );
    // Deleting a thread keeps its artifact folders, as `delete --help` says.
    let delete = db.graph(&["delete", "--help"]).expect(0).stdout;
    assert!(
        delete.contains("its artifact version folders are kept"),
        "{delete}"
    );
    let memo = db
        .graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .without_model()
        .expect(0);
    db.graph(&["delete", &memo.thread()]).expect(0);
    assert!(db.out().join("Fernstone-v0.0.1/4-final-draft.md").is_file());
}

#[test]
fn the_database_can_come_from_graph_db() {
    let db = Db::new();
    let out = harness::TestCommand::bare(&[
        "run",
        "pipeline",
        "--input",
        "x",
        "--yes",
        "--set",
        "step_ms=1",
    ])
    .env("GRAPH_DB", db.path())
    .expect(0);
    let thread = out.thread();
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], Value::String(thread));
}

#[test]
fn quiet_prints_only_the_thread_and_verbose_adds_each_update() {
    let db = Db::new();
    let quiet = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--set",
            "step_ms=1",
            "-q",
        ])
        .expect(0);
    assert_eq!(quiet.stderr.lines().count(), 1, "{quiet}");
    assert!(quiet.stdout.starts_with("# A short guide to x"), "{quiet}");
    let verbose = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--yes",
            "--set",
            "step_ms=1",
            "-v",
        ])
        .expect(0);
    verbose.stderr_has(&["update: {", "\"log\":[\"publish\"]"]);
}

#[test]
fn every_durability_mode_runs_to_the_end() {
    let db = Db::new();
    for mode in ["sync", "async", "exit"] {
        let out = db
            .graph(&[
                "run",
                "pipeline",
                "--input",
                mode,
                "--yes",
                "--set",
                "step_ms=1",
                "--durability",
                mode,
            ])
            .expect(0);
        let history = db
            .graph(&["history", &out.thread(), "--json"])
            .expect(0)
            .json();
        let saved = history.as_array().unwrap().len();
        // Exit mode writes only the last checkpoint.
        assert_eq!(
            saved,
            if mode == "exit" { 1 } else { 5 },
            "{mode}: {history:#}"
        );
    }
    db.graph(&["run", "pipeline", "--durability", "sometimes"])
        .expect(2);
}
