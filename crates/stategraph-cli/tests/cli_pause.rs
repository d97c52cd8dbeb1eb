//! A paused run as a person reads it: the question in words, the plan once as a Markdown
//! checklist (as it is now, after edits), the command that continues and works; a fork of a
//! paused checkpoint is paused too.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::FakeOpenAi;
use harness::{Db, TestCommand};
use serde_json::json;

/// The words of the `continue` line of `graph state`, with `<ANSWER>` replaced by `answer`.
fn continue_words(state_text: &str, answer: &str) -> Vec<String> {
    let line = state_text
        .lines()
        .find_map(|l| l.strip_prefix("continue    "))
        .unwrap_or_else(|| panic!("no continue line in\n{state_text}"));
    line.split_whitespace()
        .skip(1) // the program's name
        .map(|w| w.replace("<ANSWER>", answer))
        .collect()
}

#[test]
fn the_review_pause_shows_the_plan_once_and_state_shows_it_as_edited() {
    let server = FakeOpenAi::start(
        json!({"todos": [
            {"id": "t1", "task": "How does sled flush", "kind": "research", "dependencies": []},
            {"id": "t2", "task": "What is Tokio", "kind": "research", "dependencies": []},
        ]}),
        |_| json!({"task_outcome": "answered", "status": "done", "new_tasks": []}),
    );
    let db = Db::new();
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("sled.md"),
        "# sled\nsled flushes every 500 ms.",
    )
    .unwrap();
    let corpus = format!("search.corpus={}", docs.path().display());
    let graph = |args: &[&str]| db.graph(args).with_model_at(&server.base_url());

    let paused = graph(&[
        "run",
        "research",
        "--input",
        "How does sled flush?",
        "--set",
        &corpus,
    ])
    .expect(3);
    let thread = paused.thread();
    paused.stderr_has(&[
        "`planning_mode` asks:",
        "Review the research plan.",
        "research question: How does sled flush?",
        "- [ ] t1 (research): How does sled flush",
        &format!("resume {thread} --resume <ANSWER>"),
    ]);
    assert_eq!(
        paused.stderr.matches("How does sled flush\n").count()
            + paused.stderr.matches("How does sled flush (").count(),
        1,
        "the plan is shown once\n{paused}"
    );
    assert!(
        !paused.stderr.contains("\"markdown\"") && !paused.stderr.contains("\"todos\""),
        "no raw JSON\n{paused}"
    );

    graph(&["plan", &thread, "rm", "t2"]).expect(0);
    let state = graph(&["state", &thread]).expect(0);
    assert!(state.stdout.contains("- [ ] t1 (research)"), "{state}");
    assert!(
        !state.stdout.contains("- [ ] t2"),
        "state shows the plan as it is now\n{state}"
    );
    let words = continue_words(&state.stdout, "approve");
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    assert_eq!(
        words[..4],
        ["resume", thread.as_str(), "--resume", "approve"]
    );
    // The command as suggested (it names the store itself).
    let done = TestCommand::bare(&words)
        .with_model_at(&server.base_url())
        .expect(0);
    assert!(done.stdout.contains("Sources:"), "{done}");
    assert_eq!(server.keys("PlanUpdate"), ["t1"], "t2 was removed");
}

#[test]
fn a_fork_of_a_paused_checkpoint_is_paused_with_the_same_question() {
    let db = Db::new();
    let thread = db.paused_thread();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let newest = history[0]["checkpoint_id"].as_str().unwrap().to_string();
    let fork = db
        .graph(&["fork", &thread, "--checkpoint", &newest, "--to", "copy"])
        .expect(0);
    fork.stderr_has(&["graph resume copy --resume <ANSWER>"]);

    let state = db.graph(&["state", "copy"]).expect(0);
    assert!(state.stdout.contains("status      paused"), "{state}");
    assert!(state.stdout.contains("Publish this document?"), "{state}");
    let words = continue_words(&state.stdout, "yes");
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let done = TestCommand::bare(&words).expect(0);
    assert!(done.stdout.starts_with("# A short guide to sled"), "{done}");
    // The source thread still waits for its own answer.
    let source = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(source["interrupts"].as_array().unwrap().len(), 1);
}

/// The step of a line `step N: ...` or `... at step N ...`, as printed.
fn step_after(text: &str, marker: &str) -> u64 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no `{marker}` in\n{text}"));
    text[at + marker.len()..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step after `{marker}` in\n{text}"))
}

#[test]
fn run_state_and_history_number_steps_alike() {
    let db = Db::new();
    let paused = db
        .graph(&["run", "pipeline", "--input", "sled", "--set", "step_ms=0"])
        .expect(3);
    let thread = paused.thread();
    let run = paused.stderr.clone();
    // Progress lines name the checkpoint a step saves; the waiting node runs in the next one.
    let saved = step_after(&run, "] step ");
    assert_eq!(saved, 0, "{run}");
    let last_saved = run
        .lines()
        .filter(|l| l.contains("checkpoint saved"))
        .map(|l| step_after(l, "] step "))
        .max()
        .unwrap();
    let started = run
        .lines()
        .find(|l| l.contains("review started"))
        .map(|l| step_after(l, "] step "))
        .unwrap_or_else(|| panic!("review never started in\n{run}"));
    let paused_at = step_after(&run, "paused at step ");
    assert_eq!(paused_at, last_saved, "{run}");
    assert_eq!(started, last_saved + 1, "{run}");
    paused.stderr_has(&[&format!("step {started} waits: review\n")]);

    let state = db.graph(&["state", &thread]).expect(0);
    let step_line = state
        .stdout
        .lines()
        .find(|l| l.starts_with("step "))
        .unwrap();
    assert_eq!(step_after(step_line, "step"), paused_at, "{}", state.stdout);
    let state_json = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state_json["step"], paused_at);
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(history[0]["step"], paused_at, "{history}");
}

#[test]
fn a_node_with_parallel_tasks_is_named_once_with_their_count() {
    let db = Db::new();
    let paused = db
        .run_pipeline(0, &["--interrupt-before", "draft"])
        .expect(3);
    let thread = paused.thread();
    paused.stderr_has(&["step 2 waits: draft (3 tasks)\n"]);
    assert!(!paused.stderr.contains("draft, draft"), "{paused}");
    let state = db.graph(&["state", &thread]).expect(0);
    assert!(
        state.stdout.contains("next        draft (3 tasks)\n"),
        "{state}"
    );
    // `--json` keeps one name per task.
    let json = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(json["next"], json!(["draft", "draft", "draft"]), "{json:#}");

    db.graph(&["resume", &thread]).expect(3);
    let history = db.graph(&["history", &thread]).expect(0);
    let drafted = history
        .stdout
        .lines()
        .find(|l| l.contains(" loop ") && l.contains("review"))
        .unwrap_or_else(|| panic!("no checkpoint of the drafts\n{history}"));
    assert!(drafted.contains("draft (3 tasks)"), "{history}");
    let outlined = history
        .stdout
        .lines()
        .find(|l| l.contains(" outline "))
        .unwrap_or_else(|| panic!("no checkpoint of the outline\n{history}"));
    assert!(outlined.contains("draft (3 tasks)"), "{history}");
}

#[test]
fn an_empty_answer_is_refused_at_every_review_saying_which_answers_work_and_changes_nothing() {
    let server = FakeOpenAi::start(
        json!({"todos": [
            {"id": "t1", "task": "How does sled flush", "kind": "research", "dependencies": []},
        ]}),
        |_| json!({"task_outcome": "answered", "status": "done", "new_tasks": []}),
    );
    let db = Db::new();
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("sled.md"),
        "# sled\nsled flushes every 500 ms.",
    )
    .unwrap();
    let corpus = format!("search.corpus={}", docs.path().display());
    let graph = |args: &[&str]| db.graph(args).with_model_at(&server.base_url());
    let research = graph(&[
        "run",
        "research",
        "--input",
        "How does sled flush?",
        "--set",
        &corpus,
    ])
    .expect(3)
    .thread();
    let pipeline = db.paused_thread();
    let asks = [
        (&research, "Answer `approve` to run it"),
        (&pipeline, "Publish this document? Answer yes"),
    ];
    let empty: [&[&str]; 4] = [
        &["--resume", ""],
        &["--resume", "  \n"],
        &["--resume-json", "\"\""],
        &["--resume-json", "null"],
    ];
    for (thread, question) in asks {
        let before = graph(&["history", thread, "--json"]).expect(0).json();
        for answer in empty {
            let mut args = vec!["resume", thread.as_str()];
            args.extend_from_slice(answer);
            graph(&args).expect(2).stderr_has(&[
                "an empty answer is not an answer",
                "nothing was changed",
                question,
                &format!("resume {thread} --resume <ANSWER>"),
            ]);
        }
        let after = graph(&["history", thread, "--json"]).expect(0).json();
        assert_eq!(before, after, "an empty answer changed {thread}");
    }
    assert_eq!(server.calls().len(), 1, "only the plan was paid for");
    // An edited plan that does not fit is refused in JSON's words, and asked again.
    let again = graph(&["resume", &research, "--resume-json", r#"[{"id": 1}]"#]).expect(3);
    again.stderr_has(&[
        "the edited plan is not a list of todos",
        "at [0].id, the integer 1 is not a text",
    ]);
    assert!(!again.stderr.contains("invalid type"), "{again}");
    let done = graph(&["resume", &research, "--resume", "approve"]).expect(0);
    assert!(done.stdout.contains("Sources:"), "{done}");
}
