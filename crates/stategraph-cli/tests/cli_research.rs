//! The research agent through the real `graph` binary, against a fake OpenAI-compatible server
//! on 127.0.0.1 (in this process) and a local corpus: a full run; a paused plan edited with
//! `graph plan` then resumed; a kill -9 while the model is answering, then a resume that pays
//! for no finished step again; escalation; every kind of invalid plan edit refused. No network,
//! no key.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;

use fake_openai::FakeOpenAi;
use harness::{Db, Project, TestCommand};
use research::{done, three_todos, Research, T1, T2, T3};
use serde_json::{json, Value};
use std::path::Path;

fn failed() -> Value {
    json!({"task_outcome": "the sources do not answer it", "status": "failed", "new_tasks": []})
}

fn unconfigured(cmd: TestCommand) -> TestCommand {
    cmd.without_model()
}

/// An `EDITOR` that replaces the file it is given with `text`.
fn editor_writing(dir: &Path, name: &str, text: &str) -> String {
    let content = dir.join(format!("{name}.md"));
    std::fs::write(&content, text).unwrap();
    let script = dir.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat '{}' > \"$1\"\n", content.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

#[test]
fn with_no_model_configured_inspection_works_and_a_run_fails_at_once_saying_how_to_configure_one() {
    let db = Db::new();
    let graphs = unconfigured(db.graph(&["graphs"])).expect(0);
    assert!(graphs.stdout.contains("research"), "{graphs}");
    unconfigured(db.graph(&["draw", "research"])).expect(0);
    unconfigured(db.graph(&["threads"])).expect(0);

    let out = unconfigured(db.graph(&["run", "research", "--input", "q"])).expect(2);
    assert_eq!(
        out.stderr
            .matches("no model provider is configured")
            .count(),
        1,
        "the message is printed once\n{out}"
    );
    out.stderr_has(&[
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL=http://localhost:11434/v1",
    ]);
    let threads = unconfigured(db.graph(&["threads", "--json"]))
        .expect(0)
        .json();
    assert_eq!(
        threads,
        json!([]),
        "a run that cannot start leaves no thread"
    );
}

#[test]
fn a_full_run_with_yes_prints_an_answer_with_numbered_citations() {
    let r = Research::new();
    let out = r.run(&["--yes"]).expect(0);
    assert!(out.stdout.contains("flushing its log to disk [1]"), "{out}");
    assert!(out.stdout.contains("Sources:\n[1] "), "{out}");
    assert!(out.stdout.contains("file://"), "{out}");
    // The model's reply streams (SSE) and the CLI shows it as it arrives, before the final print.
    assert!(
        out.stderr.contains("finalize │ ") && out.stderr.contains("flushing its log to disk [1]"),
        "{out}"
    );
    // What the thread's model calls cost, per node and in total.
    assert!(
        out.stderr.contains("model usage of this thread:") && out.stderr.contains("total"),
        "{out}"
    );

    // The plan, a summary and a review per todo, the answer: each asked for once.
    let s = &r.server;
    assert_eq!(s.calls().len(), 8, "{:?}", s.calls());
    assert_eq!(s.keys("Summary"), [T1, T2, T3]);
    assert_eq!(s.keys("PlanUpdate"), ["t1", "t2", "t3"]);
    assert_eq!((s.count("Plan", ""), s.count("Answer", "")), (1, 1));
    let plan = r.graph(&["plan", &out.thread()]).expect(0);
    assert!(plan.stdout.contains("- [x] t3 (research): "), "{plan}");
}

#[test]
fn a_paused_plan_edited_with_graph_plan_runs_as_edited() {
    let r = Research::new();
    let paused = r.run(&[]).expect(3);
    paused.stderr_has(&["`planning_mode` asks", "--resume <ANSWER>"]);
    let thread = paused.thread();
    assert_eq!(r.server.calls().len(), 1, "only the plan was paid for");

    let shown = r.graph(&["plan", &thread]).expect(0);
    assert!(
        shown
            .stdout
            .contains(&format!("- [ ] t3 (research): {T3} (after: t1)")),
        "{shown}"
    );
    r.graph(&["plan", &thread, "rm", "t3"]).expect(0);
    let edited = r
        .graph(&["plan", &thread, "deps", "t2", "--add", "t1"])
        .expect(0);
    assert!(
        edited
            .stdout
            .contains(&format!("- [ ] t2 (research): {T2} (after: t1)")),
        "the edited plan is shown\n{edited}"
    );
    assert!(!edited.stdout.contains("t3"), "{edited}");

    let out = r
        .graph(&["resume", &thread, "--resume", "approve"])
        .expect(0);
    assert!(out.stdout.contains("Sources:"), "{out}");
    // t3 was removed: never summarised, never reviewed; t2 waited for t1.
    assert_eq!(r.server.keys("Summary"), [T1, T2]);
    assert_eq!(r.server.keys("PlanUpdate"), ["t1", "t2"]);
    let plan = r.plan_json(&thread);
    assert_eq!(plan.as_array().unwrap().len(), 2);
    assert_eq!(plan[1]["dependencies"], json!(["t1"]));
}

#[test]
fn a_plan_edited_in_the_editor_is_stored_as_edited() {
    let r = Research::new();
    let thread = r.run(&[]).expect(3).thread();
    let tmp = tempfile::tempdir().unwrap();
    // The person drops t3, rewords t2, and adds a tool todo after t1.
    let edited = format!(
        "# Plan\n\n- [ ] t1 (research): {T1}\n- [ ] t4 (tool): Read https://sled.rs/ (after: t1)\n- [ ] t2 (research): {T2} and its scheduler\n"
    );
    let editor = editor_writing(tmp.path(), "ok", &edited);
    let out = r
        .graph(&["plan", &thread, "--edit"])
        .env("EDITOR", &editor)
        .expect(0);
    out.stderr_has(&["plan of thread", "graph resume"]);
    let plan = r.plan_json(&thread);
    let ids: Vec<&str> = plan
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t1", "t4", "t2"]);
    assert_eq!(plan[1]["kind"], "tool");
    assert_eq!(plan[2]["task"], format!("{T2} and its scheduler"));

    // An editor that changes nothing stores nothing.
    let same = tmp.path().join("same.sh");
    std::fs::write(&same, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&same, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = r.graph(&["history", &thread, "--json"]).expect(0).json();
    r.graph(&["plan", &thread, "--edit"])
        .env("EDITOR", &same)
        .expect(0)
        .stderr_has(&["not changed"]);
    let after = r.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(before, after);
}

#[test]
fn every_kind_of_invalid_plan_edit_is_refused_with_its_line_and_changes_nothing() {
    let r = Research::new();
    let thread = r.run(&[]).expect(3).thread();
    let before = r.plan_json(&thread);
    let history = r.graph(&["history", &thread, "--json"]).expect(0).json();
    let unchanged = |what: &str| {
        assert_eq!(r.plan_json(&thread), before, "{what} changed the plan");
        let now = r.graph(&["history", &thread, "--json"]).expect(0).json();
        assert_eq!(now, history, "{what} wrote a checkpoint");
    };

    // One-todo edits. The rendered plan has its todos on lines 5, 6, 7 (and a new one on 8).
    let refused: [(&[&str], &[&str]); 6] = [
        (
            &["add", "Read more", "--deps", "t9"],
            &[
                "line 8: unknown dependency `t9`",
                "8 | - [ ] t4 (research): Read more (after: t9)",
            ],
        ),
        (
            &["deps", "t1", "--add", "t3"],
            &[
                "line 5: dependency cycle among t1, t3",
                "5 | - [ ] t1 (research)",
            ],
        ),
        (
            &["add", "Again", "--id", "t2"],
            &[
                "line 8: duplicate id `t2`",
                "8 | - [ ] t2 (research): Again",
            ],
        ),
        (
            &["rm", "t1"],
            &["line 5: cannot remove `t1`: `t3` depends on it"],
        ),
        (
            &["status", "t2", "finished"],
            &["unknown status `finished`"],
        ),
        (&["move", "t9", "--to", "1"], &["no todo `t9`"]),
    ];
    for (args, needles) in refused {
        let mut full = vec!["plan", thread.as_str()];
        full.extend_from_slice(args);
        let out = r.graph(&full).expect(2);
        out.stderr_has(&["refused (the plan is unchanged)"]);
        out.stderr_has(needles);
        unchanged(&args.join(" "));
    }

    // Edits in the editor, each named by its line in the edited file.
    let tmp = tempfile::tempdir().unwrap();
    let bad: [(&str, String, &[&str]); 4] = [
        (
            "unreadable",
            format!("# Plan\n\n- [ ] t1 (research): {T1}\nthis line is not a todo\n"),
            &[
                "line 4: cannot read this line",
                "4 | this line is not a todo",
            ],
        ),
        (
            "duplicate",
            "- [ ] t1 (research): a\n- [ ] t1 (research): b\n".to_string(),
            &["line 2: duplicate id `t1`", "2 | - [ ] t1 (research): b"],
        ),
        (
            "cycle",
            "- [ ] t1 (research): a (after: t2)\n- [ ] t2 (research): b (after: t1)\n".to_string(),
            &["line 1: dependency cycle among t1, t2"],
        ),
        (
            "unknown",
            "- [ ] t1 (research): a\n\n- [ ] t2 (research): b (after: t9)\n".to_string(),
            &[
                "line 3: unknown dependency `t9`",
                "3 | - [ ] t2 (research): b (after: t9)",
            ],
        ),
    ];
    for (name, text, needles) in bad {
        let editor = editor_writing(tmp.path(), name, &text);
        let out = r
            .graph(&["plan", &thread, "--edit"])
            .env("EDITOR", &editor)
            .expect(2);
        out.stderr_has(&[
            "the edited plan was refused (the plan is unchanged)",
            "your edit is kept in",
        ]);
        out.stderr_has(needles);
        unchanged(name);
    }

    // The plan still runs as generated.
    r.graph(&["resume", &thread, "--resume", "approve"])
        .expect(0);
    assert_eq!(r.server.keys("Summary"), [T1, T2, T3]);
}

#[test]
fn a_running_thread_plan_can_be_read_but_not_edited() {
    let r = Research::new();
    r.server.hold(|c| c.kind == "Summary" && c.key == T1);
    let mut run = r.run(&["--yes"]).spawn();
    let thread = run.thread();
    r.server.wait_for(|c| c.kind == "Summary" && c.key == T1);

    let shown = r.graph(&["plan", &thread]).expect(0);
    assert!(shown.stdout.contains("- [ ] t1 (research)"), "{shown}");
    let busy = r.graph(&["plan", &thread, "rm", "t2"]).expect(1);
    busy.stderr_has(&["busy"]);

    r.server.release();
    let out = run.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(r.server.keys("Summary"), [T1, T2, T3], "t2 was not removed");
}

#[test]
fn a_kill_while_the_model_answers_then_resume_pays_for_no_finished_step_again() {
    let r = Research::new();
    // The summary of todo 2 gets no reply: the run is killed while it waits for it.
    r.server.hold(|c| c.kind == "Summary" && c.key == T2);
    let mut run = r.run(&["--yes"]).spawn();
    let thread = run.thread();
    r.server.wait_for(|c| c.kind == "Summary" && c.key == T2);
    run.signal(libc::SIGKILL);
    let killed = run.finish();
    assert_eq!(killed.code, None, "killed by a signal\n{killed}");
    r.server.release();

    let t1 = r.todo(&thread, "t1");
    assert_eq!(t1["status"], "done", "t1 was finished before the kill");

    let out = r.graph(&["resume", &thread]).expect(0);
    assert!(out.stdout.contains("Sources:"), "{out}");
    let s = &r.server;
    // Finished before the kill: the plan, t1's summary and review. None asked for again.
    assert_eq!(s.count("Plan", ""), 1);
    assert_eq!(s.count("Summary", T1), 1);
    assert_eq!(s.count("PlanUpdate", "t1"), 1);
    // Cut off by the kill, so asked again; everything after, once.
    assert_eq!(s.count("Summary", T2), 2);
    assert_eq!(s.count("PlanUpdate", "t2"), 1);
    assert_eq!(s.count("Summary", T3), 1);
    assert_eq!(s.count("PlanUpdate", "t3"), 1);
    assert_eq!(s.count("Answer", ""), 1);
    assert_eq!(s.calls().len(), 9);
}

#[test]
fn a_todo_that_keeps_failing_is_escalated_and_the_run_still_answers() {
    let server = FakeOpenAi::start(three_todos(), |id| {
        if id.starts_with("t1") {
            failed()
        } else {
            done()
        }
    });
    let r = Research::with_server(server);
    let out = r.run(&["--yes"]).expect(0);
    assert!(out.stdout.contains("Sources:"), "{out}");
    let thread = out.thread();

    let t1 = r.todo(&thread, "t1");
    assert_eq!(t1["status"], "failed");
    assert_eq!(t1["escalated"], true);
    let reason = t1["failure_reason"].as_str().unwrap();
    assert!(reason.starts_with("gave up: escalation failed"), "{reason}");
    assert!(reason.contains("split into t1.1, t1.2"), "{reason}");
    for sub in ["t1.1", "t1.2"] {
        let t = r.todo(&thread, sub);
        assert_eq!(t["parent"], "t1", "{t}");
        assert_eq!(t["status"], "blocked", "{t}");
    }
    let t3 = r.todo(&thread, "t3");
    assert_eq!(t3["status"], "blocked");
    assert!(t3["failure_reason"]
        .as_str()
        .unwrap()
        .contains("dependency `t1` is failed"));
    assert_eq!(r.todo(&thread, "t2")["status"], "done");
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    assert!(
        state["failed"].is_null(),
        "one todo done is a success: {state:#}"
    );

    // t1 was tried up to its attempt cap, split once, and t3 never ran.
    let s = &r.server;
    assert_eq!(s.count("Summary", T1), 2);
    assert_eq!(s.count("Split", T1), 1);
    assert_eq!(s.count("Summary", T3), 0);
    let shown = r.graph(&["plan", &thread]).expect(0);
    assert!(shown.stdout.contains("- [!] t1 (research)"), "{shown}");
    assert!(shown.stdout.contains("(parent: t1)"), "{shown}");
    assert!(shown.stdout.contains("    reason: gave up"), "{shown}");
}

#[test]
fn an_emptied_editor_buffer_aborts_the_plan_edit_and_a_byte_order_mark_is_accepted() {
    let r = Research::new();
    let thread = r.run(&[]).expect(3).thread();
    let before = r.plan_json(&thread);
    let history = r.graph(&["history", &thread, "--json"]).expect(0).json();
    let tmp = tempfile::tempdir().unwrap();

    // Emptied (or left blank) in the editor: aborted like `git commit`, exit 1, nothing stored.
    for (name, text) in [
        ("empty", ""),
        ("blank", "\n  \n\t\n"),
        ("bom-only", "\u{feff}\n"),
    ] {
        let editor = editor_writing(tmp.path(), name, text);
        let out = r
            .graph(&["plan", &thread, "--edit"])
            .env("EDITOR", &editor)
            .expect(1);
        out.stderr_has(&["aborted", "empty", "the plan is unchanged"]);
        assert_eq!(r.plan_json(&thread), before, "{name}");
        let now = r.graph(&["history", &thread, "--json"]).expect(0).json();
        assert_eq!(now, history, "{name}: no checkpoint was written");
    }

    // Every todo deleted, the header kept: refused like any invalid edit (exit 2), kept aside.
    let editor = editor_writing(tmp.path(), "header-only", "# Plan\n\n");
    r.graph(&["plan", &thread, "--edit"])
        .env("EDITOR", &editor)
        .expect(2)
        .stderr_has(&["no todo left", "the plan is unchanged"]);
    assert_eq!(r.plan_json(&thread), before);

    // A plan saved with a UTF-8 byte-order mark first: read as if it had none.
    let edited =
        format!("\u{feff}# Plan\n\n- [ ] t1 (research): {T1}\n- [ ] t2 (research): {T2}\n");
    let editor = editor_writing(tmp.path(), "bom", &edited);
    r.graph(&["plan", &thread, "--edit"])
        .env("EDITOR", &editor)
        .expect(0);
    let ids: Vec<Value> = r
        .plan_json(&thread)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(ids, [json!("t1"), json!("t2")]);
    // So is an answer to the review that starts with one.
    let answer = format!("\u{feff}# Plan\n\n- [ ] t1 (research): {T1}\n");
    r.graph(&["resume", &thread, "--resume", &answer]).expect(0);
    assert_eq!(r.plan_json(&thread).as_array().unwrap().len(), 1);
}

#[test]
fn a_run_where_no_todo_succeeded_ends_with_exit_1_and_says_so() {
    let r = Research::with_server(FakeOpenAi::start(three_todos(), |_| failed()));
    let out = r.run(&["--yes"]).expect(1);
    out.stderr_has(&["finished but failed", "no todo of the plan succeeded"]);
    assert!(
        out.stdout.contains("no todo of the plan succeeded"),
        "the answer still says what could not be found\n{out}"
    );
    let thread = out.thread();
    for todo in r.plan_json(&thread).as_array().unwrap() {
        assert_ne!(todo["status"], "done", "{todo}");
    }
    // With --json too: the document names the failure, the exit code is 1.
    let json = r.run(&["--yes", "--json"]).expect(1).json();
    assert!(
        json["error"]
            .as_str()
            .is_some_and(|e| e.contains("no todo of the plan succeeded")),
        "{json:#}"
    );
    // `threads` and `state` say so too, derived from the thread's state by its graph.
    let why = "no todo of the plan succeeded";
    let state = r.graph(&["state", &thread]).expect(0);
    assert!(
        state
            .stdout
            .contains(&format!("status      done (failed: {why}")),
        "{state}"
    );
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["status"], "done", "{state:#}");
    assert!(state["failed"].as_str().is_some_and(|f| f.contains(why)));
    let listing = r.graph(&["threads"]).expect(0);
    let row = listing
        .stdout
        .lines()
        .find(|l| l.starts_with(&thread))
        .unwrap();
    assert!(row.contains("done (failed)"), "{listing}");
    assert!(listing
        .stdout
        .contains(&format!("finished but failed: {why}")));
    let listing = r.graph(&["threads", "--json"]).expect(0).json();
    for t in listing.as_array().unwrap() {
        assert!(t["failed"].as_str().is_some_and(|f| f.contains(why)), "{t}");
    }
    // One todo succeeding is enough for exit 0 (`a_todo_that_keeps_failing_is_escalated...`).
}

#[test]
fn threads_says_done_failed_from_the_verdict_the_run_kept_without_reading_the_state() {
    // The run reads its graph from a project's own graph file...
    let r = Research::with_server(FakeOpenAi::start(three_todos(), |_| failed()));
    let project = Project::new();
    let file = project.graph_file("research", str::to_string);
    let out = r.run(&["--yes"]).current_dir(project.path()).expect(1);
    out.stderr_has(&["graphs/research.toml", "finished but failed"]);
    let thread = out.thread();
    // ...which then goes away: the thread's graph cannot be built, so its state cannot be
    // decoded or judged any more, as `state` shows.
    std::fs::remove_file(&file).unwrap();
    let state = r.graph(&["state", &thread]).output();
    assert_ne!(state.code, Some(0), "{state}");
    // `threads` still says it failed, and why: from the verdict kept with the thread when the
    // run ended, not from its state. From the thread's index entry, and from its store when the
    // index is gone (the index is only a cache of the store).
    let why = "no todo of the plan succeeded";
    let index = r.db.store_dir(&thread).with_file_name("index.json");
    for from in ["index", "store"] {
        if from == "store" {
            std::fs::remove_file(&index).unwrap();
        }
        let listing = r.graph(&["threads"]).expect(0);
        let row = listing
            .stdout
            .lines()
            .find(|l| l.starts_with(&thread))
            .unwrap_or_else(|| panic!("{from}: {thread} missing\n{listing}"));
        assert!(row.contains("done (failed)"), "{from}: {listing}");
        assert!(
            listing
                .stdout
                .contains(&format!("finished but failed: {why}")),
            "{from}: {listing}"
        );
        let listed = r.graph(&["threads", "--json"]).expect(0).json();
        assert!(
            listed[0]["failed"]
                .as_str()
                .is_some_and(|f| f.contains(why)),
            "{from}: {listed:#}"
        );
    }
    assert!(!index.exists(), "a listing writes nothing back");
}

#[test]
fn a_kept_verdict_holds_only_for_the_checkpoint_it_judged() {
    let r = Research::with_server(FakeOpenAi::start(three_todos(), |_| failed()));
    let thread = r.run(&["--yes"]).expect(1).thread();
    // An edit writes a newer checkpoint whose state no longer fails (no plan, so no todo that
    // failed): the run's verdict is not that checkpoint's, and the listing judges its state.
    r.graph(&[
        "update",
        &thread,
        "--set-json",
        r#"{"plan": {"$overwrite": []}}"#,
    ])
    .expect(0);
    let listed = r.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed:#}");
    assert_eq!(listed[0]["status"], "done", "{listed:#}");
    assert_eq!(listed[0]["failed"], Value::Null, "{listed:#}");
    let listing = r.graph(&["threads"]).expect(0);
    assert!(!listing.stdout.contains("failed"), "{listing}");
}
