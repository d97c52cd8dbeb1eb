//! Two `graph serve` processes over one Postgres database (a throwaway cluster, see
//! stategraph-postgres/tests/support): threads made through one are read and searched through
//! the other, and a run started through one is streamed by a client of the other, which follows
//! the run's checkpoints in the database until the run's record says it ended; an item of the
//! long-term store put through one is read through the other and by `graph store`. And a server
//! beside `graph worker` on the same database: a thread the worker ran (from `graph submit`) is
//! read, searched and answered through the server.

#[path = "../../../tests/support/cli.rs"]
mod harness;
mod queue_support;
mod serve_support;

use queue_support::pg_cluster;

use harness::{Running, TestCommand};
use reqwest::Method;
use serde_json::json;
use serve_support::*;
use std::time::Duration;
use tokio::time::timeout;

/// `graph serve` on a free port over the database at `url`; the process and its base URL.
fn serve(url: &str, out: &std::path::Path) -> (Running, String) {
    let mut server = TestCommand::bare(&["serve", "--addr", "127.0.0.1:0", "--db", url])
        .without_model()
        .env("GRAPH_OUT", out)
        .env("XDG_DATA_HOME", out.join("data-home"))
        .spawn();
    server.wait_for("serving");
    let base = format!("http://{}", announced_addr(&server.stderr()));
    (server, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_through_one_server_is_streamed_through_another() {
    let db = pg_cluster::cluster().database();
    let out = tempfile::tempdir().unwrap();
    let (one, a) = serve(db.url(), out.path());
    let (two, b) = serve(db.url(), out.path());
    let http = client();

    // Threads made on either are seen on both.
    let made = json!({"thread_id": "shared", "metadata": {"team": "blue"}});
    let (status, body) = call(&http, &a, Method::POST, "/threads", Some(made)).await;
    assert_eq!(status, 200, "{body}");
    let (status, seen) = call(&http, &b, Method::GET, "/threads/shared", None).await;
    assert_eq!(
        (status, &seen["metadata"]["team"]),
        (200, &json!("blue")),
        "{seen}"
    );
    let made = json!({"thread_id": "other-way", "metadata": {"team": "red"}});
    let (status, body) = call(&http, &b, Method::POST, "/threads", Some(made)).await;
    assert_eq!(status, 200, "{body}");
    let (status, seen) = call(&http, &a, Method::GET, "/threads/other-way", None).await;
    assert_eq!(
        (status, &seen["metadata"]["team"]),
        (200, &json!("red")),
        "{seen}"
    );

    // A run started through A, streamed from B while it runs.
    let (status, run) = call(
        &http,
        &a,
        Method::POST,
        "/threads/shared/runs",
        Some(pipeline_run(150, &["values"])),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    // The run's record reaches the database when it starts.
    let path = format!("/threads/shared/runs/{run_id}");
    let started = timeout(Duration::from_secs(10), async {
        loop {
            let (status, got) = call(&http, &b, Method::GET, &path, None).await;
            if status == 200 {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("server B knows the run within 10 s");
    assert_eq!(started["status"], "running", "{started}");

    let followed = timeout(
        Duration::from_secs(30),
        join_stream(&http, &b, "shared", &run_id, None),
    )
    .await
    .expect("B's stream ends within 30 s");
    assert_eq!(check_complete(&followed, 0, "B's stream"), "success");
    assert_eq!(followed[0].event, "metadata");
    assert_eq!(followed[0].data["run_id"], json!(run_id));
    let values: Vec<_> = followed.iter().filter(|e| e.event == "values").collect();
    assert!(
        values.len() >= 3,
        "B streamed the steps as they were saved: {followed:?}"
    );
    let (_, state) = call(&http, &b, Method::GET, "/threads/shared/state", None).await;
    assert_eq!(values.last().unwrap().data, state["values"], "{state}");
    let (_, ended) = call(&http, &b, Method::GET, &path, None).await;
    assert_eq!(ended["status"], "success", "{ended}");
    let (status, joined) = call(&http, &b, Method::GET, &format!("{path}/join"), None).await;
    assert_eq!(
        (status, &joined),
        (200, &state["values"]),
        "B's join answers the final values"
    );

    // Searched from B, a thread A made and ran (a thread is listed once it has a checkpoint).
    let search = json!({"metadata": {"team": "blue"}});
    let (status, found) = call(&http, &b, Method::POST, "/threads/search", Some(search)).await;
    assert_eq!(status, 200, "{found}");
    let found: Vec<&str> = found
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["thread_id"].as_str())
        .collect();
    assert_eq!(found, ["shared"]);

    // The long-term store: an item put through A is read through B and by `graph store` while
    // both run (Postgres, unlike a folder's sled directory, admits every process at once).
    let item = json!({"namespace": ["team", "blue"], "key": "lead", "value": {"name": "ada"}});
    let (status, body) = call(&http, &a, Method::PUT, "/store/items", Some(item)).await;
    assert_eq!(status, 204, "{body}");
    let path = "/store/items?namespace=team.blue&key=lead";
    let (status, got) = call(&http, &b, Method::GET, path, None).await;
    assert_eq!(
        (status, &got["value"]),
        (200, &json!({"name": "ada"})),
        "{got}"
    );
    let listed = TestCommand::bare(&[
        "store",
        "get",
        "team/blue",
        "lead",
        "--json",
        "--db",
        db.url(),
    ])
    .without_model()
    .env("XDG_DATA_HOME", out.path().join("data-home"))
    .expect(0)
    .json();
    assert_eq!(listed["value"], json!({"name": "ada"}), "{listed}");

    for server in [one, two] {
        server.signal(libc::SIGTERM);
        let done = server.finish();
        assert_eq!(done.code, Some(0), "{}", done.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_a_worker_ran_is_read_searched_and_answered_through_a_server() {
    let db = pg_cluster::cluster().database();
    let out = tempfile::tempdir().unwrap();
    let graph = queue_support::Graph::new(db.url(), out.path());
    let (server, base) = serve(db.url(), out.path());
    let mut worker = graph.worker("w1", &["--lease", "2"]);
    let http = client();

    // Submitted to the queue, run by the worker up to the pipeline's review.
    let submitted = graph.ok(&[
        "submit",
        "pipeline",
        "--input",
        "queued agents",
        "--thread",
        "q",
    ]);
    let run_id = submitted.trim().to_string();
    queue_support::wait_until(Duration::from_secs(60), "the worker pauses the run", || {
        graph
            .runs()
            .iter()
            .any(|r| r["run_id"] == run_id.as_str() && r["status"] == "paused")
    });

    // The server reads where the worker left the thread, and finds it by status.
    let (status, state) = call(&http, &base, Method::GET, "/threads/q/state", None).await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["next"], json!(["review"]), "{state}");
    assert_eq!(state["values"]["topic"], "queued agents", "{state}");
    let search = json!({"status": "interrupted"});
    let (status, found) = call(&http, &base, Method::POST, "/threads/search", Some(search)).await;
    assert_eq!(status, 200, "{found}");
    let found: Vec<&str> = found
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["thread_id"].as_str())
        .collect();
    assert_eq!(found, ["q"]);

    // Answered through the server, which runs the rest itself: the worker's lease on the
    // thread went with its paused run.
    let answer = json!({"assistant_id": "pipeline", "command": {"resume": "yes"}});
    let (status, values) = call(
        &http,
        &base,
        Method::POST,
        "/threads/q/runs/wait",
        Some(answer),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    let (_, state) = call(&http, &base, Method::GET, "/threads/q/state", None).await;
    assert_eq!(
        state["next"],
        json!([]),
        "the thread ran to its end: {state}"
    );
    assert_eq!(values, state["values"]);
    // The queue still tells the run it ran as paused; the CLI reads the server's ending.
    let shown = graph.ok(&["state", "q", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["next"], json!([]), "{shown}");

    worker.signal(libc::SIGTERM);
    worker.wait(Duration::from_secs(30));
    server.signal(libc::SIGTERM);
    let done = server.finish();
    assert_eq!(done.code, Some(0), "{}", done.stderr);
}
