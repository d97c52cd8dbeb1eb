//! `POST /runs/cancel`: several runs cancelled at once, chosen by status (of every thread or of
//! one) or named; what it leaves alone; each bad request refused by name.

use super::support::TestServer;
use serde_json::{json, Value};

/// A background run of `gated` on `thread` (it waits at its first step for the test's gate).
async fn gated_run(s: &TestServer, thread: &str, strategy: &str) -> String {
    let body = json!({"assistant_id": "gated", "input": {}, "multitask_strategy": strategy});
    let run = s.post(&format!("/threads/{thread}/runs"), body).await;
    run["run_id"].as_str().unwrap().to_string()
}

async fn run_of(s: &TestServer, thread: &str, run: &str) -> Value {
    s.get(&format!("/threads/{thread}/runs/{run}")).await
}

/// The run once it has ended.
async fn ended(s: &TestServer, thread: &str, run: &str) -> Value {
    s.get(&format!("/threads/{thread}/runs/{run}/join")).await;
    run_of(s, thread, run).await
}

async fn cancel_many(s: &TestServer, query: &str, body: Value) -> (u16, Value) {
    s.call("POST", &format!("/runs/cancel{query}"), Some(body))
        .await
}

#[tokio::test]
async fn runs_are_cancelled_together_by_status_or_by_id() {
    let s = TestServer::start().await;
    let (one, two) = (s.thread(json!({})).await, s.thread(json!({})).await);
    let first = gated_run(&s, &one, "reject").await;
    let queued = gated_run(&s, &one, "enqueue").await;
    let other = gated_run(&s, &two, "reject").await;
    assert_eq!(run_of(&s, &one, &queued).await["status"], "pending");

    // The waiting ones only: the queued run never starts; the running ones go on.
    let (status, body) = cancel_many(&s, "", json!({"status": "pending"})).await;
    assert_eq!(status, 204, "{body}");
    let never = ended(&s, &one, &queued).await;
    assert_eq!(never["status"], "interrupted", "{never}");
    assert_eq!(run_of(&s, &one, &first).await["status"], "running");
    assert_eq!(run_of(&s, &two, &other).await["status"], "running");

    // The running ones of one thread only.
    let (status, _) = cancel_many(&s, "", json!({"thread_id": two, "status": "running"})).await;
    assert_eq!(status, 204);
    assert_eq!(ended(&s, &two, &other).await["status"], "interrupted");
    assert_eq!(run_of(&s, &one, &first).await["status"], "running");

    // Named, rolled back; a run already ended among them is left as it is.
    let named = json!({"thread_id": one, "run_ids": [first, queued]});
    let (status, _) = cancel_many(&s, "?action=rollback", named).await;
    assert_eq!(status, 204);
    let rolled = ended(&s, &one, &first).await;
    assert_eq!(rolled["status"], "interrupted");
    assert_eq!(rolled["cancel_reason"], "rolled back by request");
    assert_eq!(
        run_of(&s, &one, &queued).await["cancel_reason"],
        "cancelled by request"
    );
}

#[tokio::test]
async fn a_bad_bulk_cancel_is_refused_by_name_and_cancels_nothing() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let run = gated_run(&s, &t, "reject").await;
    for (query, body, field) in [
        ("", json!({}), "run_ids"),
        ("", json!({"run_ids": [run], "status": "all"}), "status"),
        ("", json!({"status": "done"}), "status"),
        ("?action=stop", json!({"status": "all"}), "action"),
    ] {
        let (status, answer) = cancel_many(&s, query, body).await;
        assert_eq!(status, 422, "{answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
    }
    let unknown = json!({"run_ids": [run, "no-such-run"]});
    let (status, answer) = cancel_many(&s, "", unknown).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(run_of(&s, &t, &run).await["status"], "running");
    s.gate.add_permits(4);
    assert_eq!(ended(&s, &t, &run).await["status"], "success");
}
