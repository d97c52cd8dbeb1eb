//! Assistants, threads, state and history, and the errors that name what is wrong.

use super::support::{names, TestServer, STEP_NODES};
use serde_json::json;

#[tokio::test]
async fn assistants_are_the_registered_graphs() {
    let s = TestServer::start().await;
    let found = s.post("/assistants/search", json!({})).await;
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["assistant_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["approval", "checklist", "gated", "recall", "steps"]);
    let one = s.get("/assistants/approval").await;
    assert_eq!(one["graph_id"], "approval");
    assert_eq!(
        one["description"],
        "Drafts, asks a person to approve, finishes"
    );

    let graph = s.get("/assistants/approval/graph").await;
    let nodes: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["__start__", "__end__", "draft", "ask", "finish"]);
    let edge = &graph["edges"][0];
    assert_eq!(
        (edge["source"].as_str(), edge["target"].as_str()),
        (Some("__start__"), Some("draft"))
    );

    let versions = s.post("/assistants/approval/versions", json!({})).await;
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
    assert_eq!(versions[0]["version"], 1);
    assert_eq!(versions[0]["assistant_id"], "approval");
    let other = json!({"metadata": {"created_by": "someone"}});
    let none = s.post("/assistants/approval/versions", other).await;
    assert_eq!(none, json!([]));

    let schemas = s.get("/assistants/approval/schemas").await;
    assert_eq!(schemas["input_schema"]["required"], json!(["item"]));

    let (status, body) = s.call("GET", "/assistants/nope", None).await;
    assert_eq!(status, 404);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("approval, checklist, gated, recall, steps"),
        "{body}"
    );
}

#[tokio::test]
async fn threads_are_made_found_patched_and_deleted() {
    let s = TestServer::start().await;
    let made = s
        .post(
            "/threads",
            json!({"thread_id": "t-ann", "metadata": {"user": "ann"}}),
        )
        .await;
    assert_eq!(made["status"], "idle");
    assert_eq!(made["values"], json!(null));
    s.thread(json!({"user": "bob"})).await;

    // The same id again: refused, unless the caller asks for the existing one.
    let (status, body) = s
        .call("POST", "/threads", Some(json!({"thread_id": "t-ann"})))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("do_nothing"));
    let again = s
        .post(
            "/threads",
            json!({"thread_id": "t-ann", "if_exists": "do_nothing"}),
        )
        .await;
    assert_eq!(again["metadata"]["user"], "ann");

    let found = s
        .post("/threads/search", json!({"metadata": {"user": "ann"}}))
        .await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert_eq!(found[0]["thread_id"], "t-ann");
    assert_eq!(s.post("/threads/count", json!({})).await, json!(2));

    let patched = s
        .call(
            "PATCH",
            "/threads/t-ann",
            Some(json!({"metadata": {"team": "x"}})),
        )
        .await
        .1;
    assert_eq!(patched["metadata"], json!({"user": "ann", "team": "x"}));

    let (status, _) = s.call("DELETE", "/threads/t-ann", None).await;
    assert_eq!(status, 204);
    let (status, body) = s.call("GET", "/threads/t-ann", None).await;
    assert_eq!(status, 404);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("no thread `t-ann`"),
        "{body}"
    );
}

#[tokio::test]
async fn state_is_read_edited_and_its_history_paged() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let out = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "steps", "input": {"topic": "x"}}),
        )
        .await;
    assert_eq!(out["log"], json!(["one", "two", "three", "four"]));

    let state = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["values"]["topic"], "x");
    assert_eq!(state["next"], json!([]));
    let newest = state["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(state["checkpoint"]["thread_id"], t.as_str());

    // Edited as if `two` wrote it: `three` and `four` run next.
    let edit = json!({"values": {"log": ["edited"]}, "as_node": "two"});
    let saved = s.post(&format!("/threads/{t}/state"), edit).await;
    let edited = saved["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let state = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["checkpoint"]["checkpoint_id"], edited);
    assert_eq!(state["next"], json!(["three"]));
    assert_eq!(
        state["values"]["log"].as_array().unwrap().last().unwrap(),
        "edited"
    );

    // The state before the edit is still there, by its id.
    let before = s.get(&format!("/threads/{t}/state/{newest}")).await;
    assert_eq!(before["values"]["log"].as_array().unwrap().len(), 4);

    let page = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 2}))
        .await;
    let page = page.as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["checkpoint"]["checkpoint_id"], edited);
    let older = s
        .post(
            &format!("/threads/{t}/history"),
            json!({"limit": 100, "before": page[1]["checkpoint"]}),
        )
        .await;
    assert_eq!(
        older.as_array().unwrap().len(),
        4,
        "input and three steps before the last two"
    );
    let updates = s
        .post(
            &format!("/threads/{t}/history"),
            json!({"metadata": {"source": "update"}}),
        )
        .await;
    assert_eq!(updates.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn what_does_not_fit_is_named() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let runs = format!("/threads/{t}/runs");
    let cases = [
        (
            json!({"assistant_id": "steps", "input": {"log": "not a list"}}),
            "input: ",
            "log",
        ),
        (
            json!({"assistant_id": "steps", "stream_mode": "tokens"}),
            "stream_mode: ",
            "tokens",
        ),
        (
            json!({"assistant_id": "steps", "interrupt_before": ["nine"]}),
            "interrupt_before: ",
            "one, two, three, four",
        ),
        (json!({"input": {}}), "assistant_id: ", "registered graph"),
        (
            json!({"assistant_id": "steps", "command": {"resume": "yes"}}),
            "command.resume: ",
            "no pending question",
        ),
        (
            json!({"assistant_id": "steps", "multitask_strategy": "sometimes"}),
            "multitask_strategy: ",
            "unknown variant",
        ),
    ];
    for (body, starts, mentions) in cases {
        let (status, answer) = s.call("POST", &runs, Some(body.clone())).await;
        let message = answer["message"].as_str().unwrap_or_default();
        assert_eq!(status, 422, "{body}: {answer}");
        assert!(
            message.starts_with(starts) && message.contains(mentions),
            "{body}: {message}"
        );
    }
    let (status, answer) = s
        .call(
            "POST",
            "/threads/none-such/runs",
            Some(json!({"assistant_id": "steps"})),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = s
        .call("POST", "/threads", Some(json!({"thread_id": "a/b"})))
        .await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with("thread_id: "),
        "{answer}"
    );
}

/// A thread made with POST /threads stays taken for its first run (which then reads and writes
/// the store its creation opened), and lets go within `LINGER` when no run comes: another
/// process (here a second store over the same folder, which locks and serves as a process
/// does) reads it through the server meanwhile, and its write waits, then succeeds. A run of
/// the server takes it back, and lets it go when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_thread_is_kept_for_its_first_run_then_let_go_to_other_processes() {
    use stategraph::checkpoint::Checkpointer;
    use std::time::{Duration, Instant};
    let s = TestServer::start().await;
    let other = stategraph_sled::FolderCheckpointer::open(s.store.root()).unwrap();

    let t = s.thread(json!({"user": "ann"})).await;
    assert!(
        other.is_running(&t).await,
        "the server holds the thread it made"
    );
    let record = other
        .get_journal(&t, stategraph_server::THREAD_RECORD_KEY)
        .await
        .unwrap()
        .expect("read through the server");
    assert_eq!(record["metadata"], json!({"user": "ann"}));
    let began = Instant::now();
    other.put_journal(&t, "note", &json!(1)).await.unwrap();
    let waited = began.elapsed();
    assert!(
        waited < stategraph_server::LINGER + Duration::from_secs(1),
        "the write waited {waited:?} for a holder that runs nothing"
    );
    other.release(&t).unwrap();

    // The server takes it back to run it; the write the other process made is there.
    let out = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "steps", "input": {"topic": "x"}}),
        )
        .await;
    assert!(out.get("__error__").is_none(), "{out}");
    assert_eq!(
        s.store.get_journal(&t, "note").await.unwrap(),
        Some(json!(1))
    );
    // Let go once the run ended (in the background: at once, or within moments).
    let deadline = Instant::now() + Duration::from_secs(3);
    while other.is_running(&t).await {
        assert!(Instant::now() < deadline, "still held after its run ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    other.put_journal(&t, "note", &json!(2)).await.unwrap();
    other.release(&t).unwrap();
}

/// A thread's next run, asked for the moment its last one's stream ended, runs: the server may
/// still be letting the thread go in the background (its own lock, its own holder answering),
/// and the new run waits for that rather than being told another process holds the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asked_for_as_the_last_one_ends_is_not_refused_as_busy() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    for round in 0..20 {
        let body = json!({"assistant_id": "steps", "input": {"topic": format!("s{round}")}});
        let events = s
            .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
            .await
            .rest()
            .await;
        assert_eq!(names(&events).last(), Some(&"end"), "round {round}");
        let (status, out) = s
            .call(
                "POST",
                &format!("/threads/{t}/runs/wait"),
                Some(json!({"assistant_id": "steps", "input": {"topic": format!("w{round}")}})),
            )
            .await;
        assert_eq!(status, 200, "round {round}: {out}");
    }
}

/// `POST /threads/prune`: threads deleted, or cut to their newest checkpoint; a request naming
/// a thread that does not exist, or one a run has, changes nothing.
#[tokio::test]
async fn threads_are_pruned_all_or_nothing() {
    let s = TestServer::start().await;
    let mut ran = Vec::new();
    for _ in 0..3 {
        let t = s.thread(json!({})).await;
        let run = json!({"assistant_id": "steps", "input": {"topic": "p"}});
        s.post(&format!("/threads/{t}/runs/wait"), run).await;
        ran.push(t);
    }
    let history = |t: &str| format!("/threads/{t}/history");
    let checkpoints = s.post(&history(&ran[0]), json!({"limit": 100})).await;
    assert_eq!(checkpoints.as_array().unwrap().len(), 5);

    let busy = s.thread(json!({})).await;
    let gated = json!({"assistant_id": "gated", "input": {}});
    s.post(&format!("/threads/{busy}/runs"), gated).await;
    for (ids, status) in [
        (json!([ran[0], "no-such-thread"]), 404),
        (json!([ran[0], busy]), 409),
    ] {
        let body = json!({"thread_ids": ids, "strategy": "keep_latest"});
        let (code, answer) = s.call("POST", "/threads/prune", Some(body)).await;
        assert_eq!(code, status, "{answer}");
    }
    let untouched = s.post(&history(&ran[0]), json!({"limit": 100})).await;
    assert_eq!(untouched, checkpoints, "a refused prune changed nothing");

    let keep = json!({"thread_ids": [ran[0], ran[1], ran[0]], "strategy": "keep_latest"});
    assert_eq!(
        s.post("/threads/prune", keep).await,
        json!({"pruned_count": 2})
    );
    let kept = s.post(&history(&ran[0]), json!({"limit": 100})).await;
    assert_eq!(kept.as_array().unwrap().len(), 1);
    assert_eq!(kept[0], checkpoints[0], "the newest, as it was");
    let state = s.get(&format!("/threads/{}/state", ran[1])).await;
    assert_eq!(state["values"]["log"], json!(STEP_NODES));

    let delete = json!({"thread_ids": [ran[2]]});
    assert_eq!(
        s.post("/threads/prune", delete).await,
        json!({"pruned_count": 1})
    );
    let (status, _) = s.call("GET", &format!("/threads/{}", ran[2]), None).await;
    assert_eq!(status, 404);
    s.gate.add_permits(4);
}
