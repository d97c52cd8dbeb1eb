//! `graph run|resume ... --stream MODES`: the asked-for events on stdout, one JSON object per
//! line, then the outcome as one line; without `--stream` the output is unchanged (the other
//! CLI tests). The research agent's answer streams as `message` events, against a fake
//! OpenAI-compatible server on 127.0.0.1.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::FakeOpenAi;
use harness::Db;
use serde_json::{json, Value};

/// Every stdout line, parsed: NDJSON or a failure naming the line.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn updates_stream_as_ndjson_then_the_outcome_and_resume_streams_too() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "durable agents",
            "--set",
            "step_ms=1",
            "--stream",
            "updates",
        ])
        .expect(3);
    let events = lines(&out.stdout);
    let (last, all) = events.split_last().expect("some lines");
    // Each section's child graph streams its own updates under its task's namespace, as they
    // happen (the children run at once, so in no fixed order among them): write, then polish.
    let (children, streamed): (Vec<&Value>, Vec<&Value>) =
        all.iter().partition(|e| e.get("namespace").is_some());
    let mut by_child: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for e in &children {
        let namespace = e["namespace"].as_str().unwrap();
        assert!(namespace.starts_with("draft:"), "{e}");
        by_child
            .entry(namespace)
            .or_default()
            .push(e["node"].as_str().unwrap());
    }
    assert_eq!(by_child.len(), 3, "{out}");
    assert!(
        by_child.values().all(|nodes| nodes == &["write", "polish"]),
        "{out}"
    );
    let nodes: Vec<&str> = streamed
        .iter()
        .map(|e| {
            assert_eq!(e["event"], "updates", "only updates: {e}");
            e["node"].as_str().unwrap()
        })
        .collect();
    // The drafts are three tasks of one step, reported in task order; the review's pause is
    // LangGraph's `__interrupt__`, with what it asks.
    assert_eq!(
        nodes,
        ["outline", "draft", "draft", "draft", "__interrupt__"],
        "{out}"
    );
    let tasks: Vec<u64> = streamed
        .iter()
        .map(|e| e["task"].as_u64().unwrap())
        .collect();
    assert_eq!(tasks, [0, 0, 1, 2, 0]);
    let asked = &streamed[4]["update"][0];
    assert_eq!(
        (asked["node"].as_str(), asked["when"].as_str()),
        (Some("review"), Some("dynamic")),
        "{out}"
    );
    assert_eq!(
        (last["event"].as_str(), last["status"].as_str()),
        (Some("outcome"), Some("paused"))
    );
    let thread = last["thread_id"].as_str().unwrap().to_string();

    let done = db
        .graph(&[
            "resume",
            &thread,
            "--resume",
            "yes",
            "--stream",
            "updates,values",
        ])
        .expect(0);
    let events = lines(&done.stdout);
    let kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            let node = e["node"].as_str().unwrap_or("").to_string();
            (e["event"].as_str().unwrap().to_string(), node)
        })
        .collect();
    // The state it resumes from first, then each step's updates and state.
    assert_eq!(
        kinds[..5],
        [
            ("values".to_string(), String::new()),
            ("updates".to_string(), "review".to_string()),
            ("values".to_string(), String::new()),
            ("updates".to_string(), "publish".to_string()),
            ("values".to_string(), String::new()),
        ],
        "{done}"
    );
    let outcome = events.last().unwrap();
    assert_eq!(outcome["status"], "done");
    assert!(outcome["state"].is_object());
}

#[test]
fn an_unknown_stream_mode_is_bad_input() {
    let db = Db::new();
    let out = db
        .graph(&["run", "pipeline", "--input", "x", "--stream", "tokens"])
        .expect(2);
    out.stderr_has(&["unknown stream mode `tokens`"]);
}

#[test]
fn the_research_answer_streams_as_message_events() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("sled.md"),
        "# Sled durability\n\nsled is an embedded database written in Rust. Writes become durable when the log is flushed to disk with fsync.",
    )
    .unwrap();
    let plan = json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []}
    ]});
    let server = FakeOpenAi::start(
        plan,
        |_| json!({"task_outcome": "answered", "status": "done", "new_tasks": []}),
    );
    let db = Db::new();
    let corpus = format!("search.corpus={}", docs.path().display());
    let out = db
        .graph(&[
            "run",
            "research",
            "--input",
            "How does sled make writes durable?",
            "--set",
            &corpus,
            "--yes",
            "--stream",
            "messages",
        ])
        .with_model_at(&server.base_url())
        .expect(0);
    let events = lines(&out.stdout);
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e["event"] == "message"),
        "{out}"
    );
    // The summaries of `execute` stream too; the answer is `finalize`'s.
    let messages: Vec<&Value> = events.iter().filter(|e| e["node"] == "finalize").collect();
    assert!(messages.len() > 1, "the answer came in pieces: {out}");
    let text: String = messages
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    let answer = events.last().unwrap()["state"]["answer"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !text.is_empty() && answer.contains(text.trim()),
        "streamed {text:?}, answer {answer:?}"
    );
}
