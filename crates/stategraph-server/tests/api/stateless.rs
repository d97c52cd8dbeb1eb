//! Stateless runs: a thread of their own, deleted when they end unless the request keeps it;
//! `POST /runs/batch`: several runs started in order, on their threads or on threads of their
//! own; a batch with a request that cannot run starts none; a run that only fails as it starts
//! stops the batch there, naming the runs already started.

use super::support::{TestServer, STEP_NODES};
use serde_json::{json, Value};

async fn joined(s: &TestServer, run: &Value) -> Value {
    let (thread, id) = (
        run["thread_id"].as_str().unwrap(),
        run["run_id"].as_str().unwrap(),
    );
    s.get(&format!("/threads/{thread}/runs/{id}/join")).await
}

async fn thread_count(s: &TestServer) -> usize {
    s.post("/threads/search", json!({"limit": 100}))
        .await
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_stateless_runs_thread_goes_when_it_ends_unless_it_is_kept() {
    let s = TestServer::start().await;
    let before = thread_count(&s).await;
    let run = json!({"assistant_id": "steps", "input": {"topic": "gone"}});
    assert_eq!(s.post("/runs/wait", run).await["log"], json!(STEP_NODES));
    // Deleted once the run has ended, a moment after it answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while thread_count(&s).await != before {
        assert!(
            std::time::Instant::now() < deadline,
            "the thread was not deleted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let kept =
        json!({"assistant_id": "steps", "input": {"topic": "kept"}, "on_completion": "keep"});
    assert_eq!(s.post("/runs/wait", kept).await["topic"], "kept");
    let found = s
        .post("/threads/search", json!({"values": {"topic": "kept"}}))
        .await;
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found[0]["values"]["log"], json!(STEP_NODES));
}

#[tokio::test]
async fn a_batch_starts_each_run_in_order() {
    let s = TestServer::start().await;
    let mine = s.thread(json!({})).await;
    let batch = json!([
        {"assistant_id": "steps", "input": {"topic": "a"}, "on_completion": "keep"},
        {"assistant_id": "steps", "input": {"topic": "b"}, "thread_id": mine},
        {"assistant_id": "approval", "input": {"item": "the memo"}, "on_completion": "keep"},
    ]);
    let runs = s.post("/runs/batch", batch).await;
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[1]["thread_id"], json!(mine));
    assert_eq!(runs[2]["assistant_id"], "approval");
    assert_eq!(joined(&s, &runs[0]).await["log"], json!(STEP_NODES));
    assert_eq!(joined(&s, &runs[1]).await["topic"], "b");
    let paused = joined(&s, &runs[2]).await;
    assert!(paused["__interrupt__"].is_array(), "{paused}");
}

#[tokio::test]
async fn a_batch_with_a_request_that_cannot_run_starts_none() {
    let s = TestServer::start().await;
    let before = thread_count(&s).await;
    let batch = json!([
        {"assistant_id": "steps", "input": {"topic": "a"}, "on_completion": "keep"},
        {"assistant_id": "steps", "input": {"topic": "b"}, "stream_mode": "nope"},
    ]);
    let (status, answer) = s.call("POST", "/runs/batch", Some(batch)).await;
    assert_eq!(status, 422, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.starts_with("[1].stream_mode: "), "{message}");
    // The graph's own check of an input: the field it names, after the run's place.
    let unfit = json!([{"assistant_id": "approval", "input": {"item": "  "}}]);
    let (status, answer) = s.call("POST", "/runs/batch", Some(unfit)).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.starts_with("[0].input: "), "{message}");
    let unknown = json!([{"assistant_id": "nope", "input": {}}]);
    let (status, answer) = s.call("POST", "/runs/batch", Some(unknown)).await;
    assert_eq!(status, 404, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().starts_with("[0]: "),
        "{answer}"
    );
    assert_eq!(
        thread_count(&s).await,
        before,
        "no run started, no thread made"
    );

    // Only starting finds a thread that does not exist: the run before it has started.
    let batch = json!([
        {"assistant_id": "steps", "input": {"topic": "a"}, "on_completion": "keep"},
        {"assistant_id": "steps", "input": {"topic": "b"}, "thread_id": "no-such-thread"},
    ]);
    let (status, answer) = s.call("POST", "/runs/batch", Some(batch)).await;
    assert_eq!(status, 404, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with("[1]: no thread `no-such-thread`"),
        "{message}"
    );
    assert!(
        message.contains("; the runs before it started: "),
        "{message}"
    );
}
