//! Runs: a pause answered with `command.resume`, two stream modes at once, a stream rejoined
//! with `Last-Event-ID`, a late joiner, a busy thread under `reject` and `enqueue`, a cancel.

use super::support::{names, Sse, TestServer, STEP_NODES};
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[tokio::test]
async fn a_paused_run_is_resumed_with_command_resume() {
    let s = TestServer::start().await;
    let t = s.thread(json!({"user": "ann"})).await;
    let out = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "approval", "input": {"item": "the report"}}),
        )
        .await;
    assert_eq!(out["draft"], "the report looks fine");
    let question = &out["__interrupt__"][0];
    assert_eq!(
        question["value"],
        json!({"approve": "the report looks fine"})
    );

    let thread = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["status"], "interrupted");
    assert_eq!(
        thread["metadata"],
        json!({"user": "ann", "graph_id": "approval"})
    );
    let state = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["next"], json!(["ask"]));
    assert_eq!(state["tasks"][0]["interrupts"][0]["id"], question["id"]);

    let out = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "approval", "command": {"resume": "approved"}}),
        )
        .await;
    assert_eq!(
        (out["verdict"].as_str(), out["done"].as_bool()),
        (Some("approved"), Some(true))
    );
    assert_eq!(s.get(&format!("/threads/{t}")).await["status"], "idle");

    // Nothing asks any more: a second answer is refused before anything runs.
    let again = json!({"assistant_id": "approval", "command": {"resume": "again"}});
    let (status, body) = s
        .call("POST", &format!("/threads/{t}/runs"), Some(again))
        .await;
    assert_eq!(status, 422, "{body}");
    // A thread belongs to its graph.
    let other = json!({"assistant_id": "steps", "input": {}});
    let (status, body) = s
        .call("POST", &format!("/threads/{t}/runs"), Some(other))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("belongs to graph `approval`"),
        "{body}"
    );

    let runs = s.get(&format!("/threads/{t}/runs")).await;
    let statuses: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["success", "interrupted"], "newest first");
}

#[tokio::test]
async fn a_run_streams_values_and_updates_together() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let body = json!({"assistant_id": "steps", "input": {"topic": "x"}, "stream_mode": ["values", "updates", "custom"]});
    let mut stream = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await;
    assert!(stream.location.as_deref().unwrap().ends_with("/stream"));
    let events = stream.rest().await;
    let ids: Vec<String> = events.iter().map(|e| e.id.clone().unwrap()).collect();
    let expected: Vec<String> = (0..events.len()).map(|i| i.to_string()).collect();
    assert_eq!(ids, expected, "every event carries its position");
    let kinds = names(&events);
    assert_eq!(kinds.first(), Some(&"metadata"));
    assert_eq!(kinds.last(), Some(&"end"));
    assert_eq!(events.last().unwrap().data["status"], "success");
    // Per step: the node's own event as it ran, its update, then the state after the step.
    let mut want = vec!["metadata", "values"];
    for _ in STEP_NODES {
        want.extend(["custom", "updates", "values"]);
    }
    want.push("end");
    assert_eq!(kinds, want);
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "updates")
        .map(|e| &e.data)
        .collect();
    assert_eq!(updates[0], &json!({"one": {"log": ["one"]}}));
    let last_values = events.iter().rev().find(|e| e.event == "values").unwrap();
    assert_eq!(last_values.data["log"], json!(STEP_NODES));
}

#[tokio::test]
async fn a_debug_stream_shows_tasks_and_checkpoints() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let body = json!({"assistant_id": "steps", "input": {}, "stream_mode": "debug"});
    let events = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await
        .rest()
        .await;
    let debug: Vec<&Sse> = events.iter().filter(|e| e.event == "debug").collect();
    let types: Vec<&str> = debug
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        &types[..4],
        ["checkpoint", "task", "task_result", "checkpoint"]
    );
    assert_eq!(debug[1].data["payload"]["name"], "one");
    assert_eq!(debug[2].data["payload"]["result"], json!({"log": ["one"]}));
    let last = debug.last().unwrap();
    assert_eq!(last.data["payload"]["values"]["log"], json!(STEP_NODES));
    assert!(
        !events.iter().any(|e| e.event == "values"),
        "values were not asked for"
    );
}

/// LangGraph's `tasks` and `checkpoints` modes: the payloads of the debug stream's task and
/// checkpoint events, each under its own name, the same whether debug is asked for too.
#[tokio::test]
async fn the_tasks_and_checkpoints_modes_are_the_debug_streams_payloads() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let modes = json!(["tasks", "checkpoints", "debug"]);
    let body = json!({"assistant_id": "steps", "input": {}, "stream_mode": modes});
    let events = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await
        .rest()
        .await;
    let of = |name: &str| -> Vec<&Value> {
        (events.iter().filter(|e| e.event == name))
            .map(|e| &e.data)
            .collect()
    };
    let (tasks, checkpoints, debug) = (of("tasks"), of("checkpoints"), of("debug"));
    let payloads = |kinds: &[&str]| -> Vec<&Value> {
        (debug
            .iter()
            .filter(|d| kinds.contains(&d["type"].as_str().unwrap())))
        .map(|d| &d["payload"])
        .collect()
    };
    assert_eq!(tasks, payloads(&["task", "task_result"]));
    assert_eq!(checkpoints, payloads(&["checkpoint"]));
    // Four nodes, each started and finished; the input's checkpoint and one per step.
    assert_eq!(tasks.len(), 8);
    assert_eq!(
        (tasks[0]["name"].as_str(), tasks[0]["triggers"].is_array()),
        (Some("one"), true)
    );
    assert_eq!(tasks[1]["result"], json!({"log": ["one"]}));
    assert_eq!(checkpoints.len(), 5);
    assert_eq!(checkpoints[1]["next"], json!(["two"]));
    assert_eq!(checkpoints[4]["values"]["log"], json!(STEP_NODES));

    let alone = json!({"assistant_id": "steps", "input": {}, "stream_mode": "tasks"});
    let t = s.thread(json!({})).await;
    let events = s
        .open(&format!("/threads/{t}/runs/stream"), Some(alone), None)
        .await
        .rest()
        .await;
    let names: BTreeSet<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["metadata", "tasks", "end"]));
}

/// A reader cut off mid-run rejoins with the last id it saw and gets the rest: together, the
/// two parts are the run's whole stream, nothing lost or repeated; a reader joining late gets
/// it all from the start.
#[tokio::test]
async fn a_stream_rejoined_with_last_event_id_misses_and_repeats_nothing() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let body = json!({"assistant_id": "gated", "input": {}, "stream_mode": ["updates", "values"]});
    let mut first = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await;
    let rejoin = first.location.clone().unwrap();
    s.gate.add_permits(2);
    let mut seen = Vec::new();
    while seen.len() < 5 {
        seen.push(first.next().await.unwrap());
    }
    drop(first);
    // A late joiner, while the run waits at its third step.
    let mut late = s.open(&rejoin, None, None).await;
    let last_id = seen.last().unwrap().id.clone().unwrap();
    s.gate.add_permits(2);
    let rest = s.open(&rejoin, None, Some(&last_id)).await.rest().await;
    let everything = late.rest().await;

    let mut joined = seen.clone();
    joined.extend(rest);
    assert_eq!(joined, everything);
    assert_eq!(
        names(&everything)
            .iter()
            .filter(|n| **n == "updates")
            .count(),
        4
    );
    assert_eq!(everything.last().unwrap().event, "end");
    // Joined once more after the end, with a mode filter: the run's updates only.
    let updates = s
        .open(&format!("{rejoin}?stream_mode=updates"), None, None)
        .await
        .rest()
        .await;
    assert_eq!(
        names(&updates),
        ["metadata", "updates", "updates", "updates", "updates", "end"]
    );
}

#[tokio::test]
async fn a_busy_thread_refuses_under_reject_and_queues_under_enqueue() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let runs = format!("/threads/{t}/runs");
    let first = s
        .post(&runs, json!({"assistant_id": "gated", "input": {}}))
        .await;
    assert_eq!(s.get(&format!("/threads/{t}")).await["status"], "busy");

    let (status, body) = s
        .call(
            "POST",
            &runs,
            Some(json!({"assistant_id": "gated", "input": {}})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "busy");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(first["run_id"].as_str().unwrap()) && message.contains("enqueue"),
        "{message}"
    );

    let queued = s
        .post(
            &runs,
            json!({"assistant_id": "gated", "input": {}, "multitask_strategy": "enqueue"}),
        )
        .await;
    assert_eq!(queued["status"], "pending");
    s.gate.add_permits(8);
    let second = s
        .get(&format!(
            "{runs}/{}/join",
            queued["run_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        second["log"].as_array().unwrap().len(),
        8,
        "the queued run ran after the first"
    );
    let first = s
        .get(&format!("{runs}/{}", first["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(first["status"], "success");
}

#[tokio::test]
async fn a_cancelled_run_keeps_its_last_checkpoint() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let runs = format!("/threads/{t}/runs");
    let run = s
        .post(&runs, json!({"assistant_id": "gated", "input": {}}))
        .await;
    let id = run["run_id"].as_str().unwrap();
    s.gate.add_permits(1);
    // Wait for the state after the first step (the first `values`: the empty input shows none,
    // as in LangGraph), then cancel the run waiting in its second.
    let mut stream = s.open(&format!("{runs}/{id}/stream"), None, None).await;
    let mut values = 0;
    while values < 1 {
        values += usize::from(stream.next().await.unwrap().event == "values");
    }
    let events = stream_after_cancel(&s, &format!("{runs}/{id}/cancel?wait=1"), &mut stream).await;
    assert_eq!(events.last().unwrap().data["status"], "interrupted");
    let run = s.get(&format!("{runs}/{id}")).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["cancel_reason"], "cancelled by request");
    let state = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["values"]["log"], json!(["one"]));
    assert_eq!(state["next"], json!(["two"]));
}

async fn stream_after_cancel(
    s: &TestServer,
    cancel: &str,
    stream: &mut super::support::Events,
) -> Vec<Sse> {
    let (status, body) = s.call("POST", cancel, None).await;
    assert_eq!(status, 200, "{body}");
    stream.rest().await
}

#[tokio::test]
async fn interrupt_cancels_the_active_run_and_runs_after_it() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let runs = format!("/threads/{t}/runs");
    let first = s
        .post(&runs, json!({"assistant_id": "gated", "input": {}}))
        .await;
    let body = json!({"assistant_id": "gated", "input": {}, "multitask_strategy": "interrupt"});
    let second = s.post(&runs, body).await;
    s.gate.add_permits(4);
    let out = s
        .get(&format!(
            "{runs}/{}/join",
            second["run_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(out["log"], json!(STEP_NODES));
    let first = s
        .get(&format!("{runs}/{}", first["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(first["status"], "interrupted");
    let reason = first["cancel_reason"].as_str().unwrap();
    assert_eq!(
        reason,
        format!("interrupted by run {}", second["run_id"].as_str().unwrap())
    );
}

#[tokio::test]
async fn a_reader_that_leaves_cancels_the_run_when_it_asked_to() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let body = json!({"assistant_id": "gated", "input": {}, "on_disconnect": "cancel"});
    let mut stream = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await;
    let run_id = stream.next().await.unwrap().data["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(stream);
    let run = s.get(&format!("/threads/{t}/runs/{run_id}/join")).await;
    assert_eq!(run, json!({"topic": "", "log": []}));
    let run = s.get(&format!("/threads/{t}/runs/{run_id}")).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["cancel_reason"], "the client disconnected");
}

/// A run from an older checkpoint replays what followed it on a new branch; the old history
/// stays as it was.
#[tokio::test]
async fn a_run_from_a_checkpoint_travels_back_in_time() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    s.post(
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "steps", "input": {}}),
    )
    .await;
    let history = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 10}))
        .await;
    let after_two = history
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["next"] == json!(["three"]))
        .unwrap()["checkpoint"]["checkpoint_id"]
        .clone();
    let body =
        json!({"assistant_id": "steps", "checkpoint_id": after_two, "stream_mode": "updates"});
    let events = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await
        .rest()
        .await;
    let replayed: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "updates")
        .map(|e| &e.data)
        .collect();
    assert_eq!(
        replayed,
        [
            &json!({"three": {"log": ["three"]}}),
            &json!({"four": {"log": ["four"]}})
        ]
    );
    let state = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state["values"]["log"], json!(STEP_NODES));
    assert_eq!(state["metadata"]["step"], json!(4));
    let all = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 100}))
        .await;
    assert!(all.as_array().unwrap().len() > history.as_array().unwrap().len());
}

/// Waits until the run's stream has shown `count` states (`values`: after the input, unless it
/// is empty, then after each step).
async fn after_values(s: &TestServer, run: &str, count: usize) -> super::support::Events {
    let mut stream = s.open(&format!("{run}/stream"), None, None).await;
    let mut values = 0;
    while values < count {
        values += usize::from(stream.next().await.unwrap().event == "values");
    }
    stream
}

/// `rollback` cancels the active run and drops the checkpoints it wrote, then runs: the thread
/// goes on from where the cancelled run found it.
#[tokio::test]
async fn rollback_cancels_the_active_run_and_drops_what_it_wrote() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let runs = format!("/threads/{t}/runs");
    s.gate.add_permits(4);
    let kept = json!({"assistant_id": "gated", "input": {"topic": "kept"}});
    s.post(&format!("{runs}/wait"), kept).await;
    // A second run takes two steps and waits in its third.
    let dropped = json!({"assistant_id": "gated", "input": {"topic": "dropped"}});
    let first = s.post(&runs, dropped).await;
    let first = format!("{runs}/{}", first["run_id"].as_str().unwrap());
    s.gate.add_permits(2);
    let mut stream = after_values(&s, &first, 3).await;
    let body = json!({"assistant_id": "gated", "input": {"topic": "after"}, "multitask_strategy": "rollback"});
    let second = s.post(&runs, body).await;
    let second_id = second["run_id"].as_str().unwrap();
    assert_eq!(
        stream.rest().await.last().unwrap().data["status"],
        "interrupted"
    );
    s.gate.add_permits(4);
    let out = s.get(&format!("{runs}/{second_id}/join")).await;
    // The first run's four steps and the last run's: none of the rolled-back run's two.
    assert_eq!(out["topic"], "after");
    assert_eq!(out["log"].as_array().unwrap().len(), 8, "{out}");
    let history = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 100}))
        .await;
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["values"]["topic"] != "dropped"),
        "{history}"
    );
    let first = s.get(&first).await;
    assert_eq!(first["status"], "interrupted");
    assert_eq!(
        first["cancel_reason"],
        format!("rolled back by run {second_id}")
    );
}

/// Cancelling with `action=rollback` leaves a thread as the run found it: here, never run.
#[tokio::test]
async fn a_run_cancelled_with_rollback_leaves_no_checkpoint() {
    let s = TestServer::start().await;
    let t = s.thread(json!({"graph_id": "gated"})).await;
    let runs = format!("/threads/{t}/runs");
    let run = s
        .post(&runs, json!({"assistant_id": "gated", "input": {}}))
        .await;
    let run = format!("{runs}/{}", run["run_id"].as_str().unwrap());
    s.gate.add_permits(1);
    // The state after the first step (the empty input shows none).
    let mut stream = after_values(&s, &run, 1).await;
    let events = stream_after_cancel(
        &s,
        &format!("{run}/cancel?action=rollback&wait=1"),
        &mut stream,
    )
    .await;
    assert_eq!(events.last().unwrap().data["status"], "interrupted");
    let history = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 10}))
        .await;
    assert_eq!(history, json!([]));
    let thread = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["status"], "idle");
    assert_eq!(s.get(&run).await["cancel_reason"], "rolled back by request");
}

/// A finished run's stream is kept whole while it is among the newest 100 finished runs; after,
/// it keeps how the run went (`metadata`, its last `values`, `end`) at the ids they had, for a
/// late joiner and for a reader rejoining after an id it saw.
#[tokio::test]
async fn an_old_finished_runs_stream_keeps_how_it_went_at_its_ids() {
    let s = TestServer::start().await;
    let t = s.thread(json!({})).await;
    let body = json!({"assistant_id": "steps", "input": {}, "stream_mode": ["updates", "values"]});
    let mut first = s
        .open(&format!("/threads/{t}/runs/stream"), Some(body), None)
        .await;
    let rejoin = first.location.clone().unwrap();
    let whole = first.rest().await;
    drop(first);
    assert_eq!(s.open(&rejoin, None, None).await.rest().await, whole);
    // 100 newer runs: it is no longer among the newest kept whole (`runs::KEEP_STREAMS`).
    for _ in 0..100 {
        let other = s.thread(json!({})).await;
        let out = s
            .post(
                &format!("/threads/{other}/runs/wait"),
                json!({"assistant_id": "steps", "input": {}}),
            )
            .await;
        assert!(out["log"].is_array(), "{out}");
    }
    let last_values = whole.iter().rev().find(|e| e.event == "values").unwrap();
    let kept = vec![
        whole[0].clone(),
        last_values.clone(),
        whole.last().unwrap().clone(),
    ];
    assert_eq!(names(&kept), ["metadata", "values", "end"]);
    assert_eq!(s.open(&rejoin, None, None).await.rest().await, kept);
    let seen = whole[2].id.clone().unwrap();
    let rest = s.open(&rejoin, None, Some(&seen)).await.rest().await;
    assert_eq!(rest, kept[1..]);
    // The run's record and result are still there.
    let run = s.get(&rejoin.replace("/stream", "")).await;
    assert_eq!(run["status"], "success");
    let modes = run["kwargs"]["stream_mode"].as_array().unwrap();
    assert!(modes.contains(&json!("updates")) && modes.contains(&json!("values")));
    let joined = s.get(&rejoin.replace("/stream", "/join")).await;
    assert_eq!(joined, last_values.data);
}
