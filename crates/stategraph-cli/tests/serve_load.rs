//! `graph serve` under load and faults, the real binary over a real folder store: 50 readers of
//! one run and 20 runs at once each get every event exactly once, in order; a reader that
//! leaves does not stop its run; a server killed mid-run and started again tells a rejoining
//! reader how the run ended, and the thread continues from its last checkpoint.
//! Every wait is bounded (the whole file runs in well under a minute).

#[path = "../../../tests/support/cli.rs"]
mod harness;
mod serve_support;

use harness::{Db, Running};
use reqwest::Method;
use serde_json::json;
use serve_support::*;
use std::time::Duration;
use tokio::time::timeout;

/// `graph serve` on a free port of 127.0.0.1 over `db`; the process and its base URL.
fn serve(db: &Db) -> (Running, String) {
    let mut server = db.graph(&["serve", "--addr", "127.0.0.1:0"]).spawn();
    server.wait_for("serving");
    let base = format!("http://{}", announced_addr(&server.stderr()));
    (server, base)
}

async fn new_thread(http: &reqwest::Client, base: &str, id: &str) {
    let (status, body) = call(
        http,
        base,
        Method::POST,
        "/threads",
        Some(json!({"thread_id": id})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_readers_of_one_run_and_twenty_runs_at_once_lose_nothing() {
    let db = Db::new();
    let (server, base) = serve(&db);
    let http = client();

    new_thread(&http, &base, "watched").await;
    let body = pipeline_run(40, &["values", "updates"]);
    let (status, run) = call(
        &http,
        &base,
        Method::POST,
        "/threads/watched/runs",
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();

    let readers = (0..50).map(|_| {
        let (http, base, run_id) = (http.clone(), base.clone(), run_id.clone());
        tokio::spawn(async move { join_stream(&http, &base, "watched", &run_id, None).await })
    });
    let readers: Vec<_> = readers.collect();

    let runs: Vec<_> = (0..20)
        .map(|i| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move {
                let thread = format!("load-{i}");
                new_thread(&http, &base, &thread).await;
                let res = http
                    .post(format!("{base}/threads/{thread}/runs/stream"))
                    .json(&pipeline_run(20, &["values", "updates"]))
                    .send()
                    .await
                    .expect("the stream opens");
                assert_eq!(res.status().as_u16(), 200);
                (thread, read_events(res, |_| true).await)
            })
        })
        .collect();

    let all = timeout(Duration::from_secs(40), async {
        let mut streams = Vec::new();
        for r in readers {
            streams.push(r.await.expect("a reader"));
        }
        let mut ran = Vec::new();
        for r in runs {
            ran.push(r.await.expect("a run"));
        }
        (streams, ran)
    })
    .await
    .expect("every stream ends within 40 s");
    let (streams, ran) = all;

    let first = &streams[0];
    assert_eq!(check_complete(first, 0, "reader 0"), "success");
    let values = first.iter().filter(|e| e.event == "values").count();
    let updates = first.iter().filter(|e| e.event == "updates").count();
    assert!(values >= 3 && updates >= 3, "{first:?}");
    for (i, s) in streams.iter().enumerate() {
        assert_eq!(s, first, "reader {i} got another stream than reader 0");
    }

    for (thread, events) in &ran {
        assert_eq!(check_complete(events, 0, thread), "success");
        let last_values = events
            .iter()
            .rev()
            .find(|e| e.event == "values")
            .expect("values");
        let (status, state) = call(
            &http,
            &base,
            Method::GET,
            &format!("/threads/{thread}/state"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{state}");
        assert_eq!(
            state["values"], last_values.data,
            "{thread}: its last values are its state"
        );
    }
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_leaves_mid_stream_does_not_stop_the_run() {
    let db = Db::new();
    let (server, base) = serve(&db);
    let http = client();
    new_thread(&http, &base, "left").await;

    let res = http
        .post(format!("{base}/threads/left/runs/stream"))
        .json(&pipeline_run(100, &["updates"]))
        .send()
        .await
        .expect("the stream opens");
    let mut seen = 0;
    let read = timeout(
        Duration::from_secs(10),
        read_events(res, |e| {
            seen += usize::from(e.event == "updates");
            seen < 2
        }),
    )
    .await
    .expect("two updates within 10 s");
    let run_id = read[0].data["run_id"]
        .as_str()
        .expect("the run's id")
        .to_string();
    drop(read); // the response was dropped inside read_events: the reader has gone

    let path = format!("/threads/left/runs/{run_id}");
    let (status, run) = call(&http, &base, Method::GET, &path, None).await;
    assert_eq!(
        (status, run["status"].as_str()),
        (200, Some("running")),
        "{run}"
    );
    let joined = timeout(
        Duration::from_secs(20),
        call(&http, &base, Method::GET, &format!("{path}/join"), None),
    )
    .await
    .expect("the run ends within 20 s");
    assert_eq!(joined.0, 200, "{}", joined.1);
    let (_, run) = call(&http, &base, Method::GET, &path, None).await;
    assert_eq!(run["status"], "success", "{run}");
    assert!(run["cancel_reason"].is_null(), "{run}");
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_tells_a_rejoining_reader_and_the_thread_resumes() {
    let db = Db::new();
    let (server, base) = serve(&db);
    let http = client();
    new_thread(&http, &base, "killed").await;
    let (status, run) = call(
        &http,
        &base,
        Method::POST,
        "/threads/killed/runs",
        Some(pipeline_run(300, &["values"])),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();

    // Read until two steps are saved, then kill the server under the reader.
    let res = http
        .get(format!("{base}/threads/killed/runs/{run_id}/stream"))
        .send()
        .await
        .expect("the stream opens");
    let mut values = 0;
    let read = timeout(
        Duration::from_secs(15),
        read_events(res, |e| {
            values += usize::from(e.event == "values");
            values < 3
        }),
    )
    .await
    .expect("three values within 15 s");
    let last_id = read.last().and_then(|e| e.id).expect("an id");
    server.signal(libc::SIGKILL);
    let _ = server.finish();

    let (server, base) = serve(&db);
    let (status, before) = call(&http, &base, Method::GET, "/threads/killed/state", None).await;
    assert_eq!(status, 200, "{before}");
    let saved = before["checkpoint"]["checkpoint_id"]
        .as_str()
        .expect("a checkpoint")
        .to_string();
    assert!(
        !before["next"].as_array().unwrap().is_empty(),
        "killed mid-run: {before}"
    );

    // The rejoining reader is told the run ended with its server, promptly.
    let rejoined = timeout(
        Duration::from_secs(10),
        join_stream(&http, &base, "killed", &run_id, Some(last_id)),
    )
    .await
    .expect("the rejoined stream ends within 10 s");
    let error = rejoined
        .iter()
        .find(|e| e.event == "error")
        .expect("an error event");
    assert_eq!(error.data["error"], "RunLost", "{rejoined:?}");
    let message = error.data["message"].as_str().unwrap();
    assert!(message.contains("POST /threads/killed/runs"), "{message}");
    assert_eq!(rejoined.last().unwrap().event, "end", "{rejoined:?}");
    assert_eq!(rejoined.last().unwrap().data["status"], "error");
    let path = format!("/threads/killed/runs/{run_id}");
    let (status, described) = call(&http, &base, Method::GET, &path, None).await;
    assert_eq!(
        (status, &described["status"]),
        (200, &json!("error")),
        "{described}"
    );
    let (status, joined) = call(&http, &base, Method::GET, &format!("{path}/join"), None).await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["__error__"]["error"], "RunLost", "{joined}");

    // Continued through the API, from its last checkpoint: what was saved is not run again.
    let continued = json!({
        "assistant_id": "pipeline",
        "input": null,
        "config": {"configurable": {"step_ms": 1, "yes": true}},
    });
    let (status, out) = timeout(
        Duration::from_secs(20),
        call(
            &http,
            &base,
            Method::POST,
            "/threads/killed/runs/wait",
            Some(continued),
        ),
    )
    .await
    .expect("the continued run ends within 20 s");
    assert_eq!(status, 200, "{out}");
    assert!(out.get("__error__").is_none(), "{out}");
    let (_, history) = call(
        &http,
        &base,
        Method::POST,
        "/threads/killed/history",
        Some(json!({"limit": 100})),
    )
    .await;
    let ids: Vec<&str> = history
        .as_array()
        .expect("a history")
        .iter()
        .filter_map(|s| s["checkpoint"]["checkpoint_id"].as_str())
        .collect();
    assert!(
        ids.contains(&saved.as_str()),
        "the saved checkpoint is in the history: {ids:?}"
    );
    let steps: Vec<i64> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["metadata"]["step"].as_i64())
        .collect();
    let mut unique = steps.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), steps.len(), "no step saved twice: {steps:?}");
    let (_, after) = call(&http, &base, Method::GET, "/threads/killed/state", None).await;
    assert_eq!(after["next"], json!([]), "{after}");
    stop(server);
}

fn stop(server: Running) {
    server.signal(libc::SIGTERM);
    let out = server.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
