//! `graph serve`: the server over the command's store. A thread the server ran and paused is
//! resumed by `graph resume` in another process (the server lets a thread go once its run
//! ends); beyond loopback the server refuses to start without a token. The API itself is tested
//! in crates/stategraph-server.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use std::io::{Read, Write};

/// One HTTP/1.1 request; its status and JSON body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect to the server");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// `graph serve` on a free loopback port, once it serves; and the address it serves on.
fn serving(db: &Db) -> (harness::Running, String) {
    let mut server = db.graph(&["serve", "--addr", "127.0.0.1:0"]).spawn();
    server.wait_for("serving");
    let stderr = server.stderr();
    let addr = stderr
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the address it serves on")
        .to_string();
    (server, addr)
}

#[test]
fn serve_refuses_to_listen_beyond_loopback_without_a_token() {
    let db = Db::new();
    db.graph(&["serve", "--addr", "0.0.0.0:0"])
        .env_remove("GRAPH_TOKEN")
        .expect(2)
        .stderr_has(&["refusing to listen on 0.0.0.0:0 without a token", "--token"]);
}

#[test]
fn a_thread_the_server_paused_is_resumed_by_the_cli() {
    let db = Db::new();
    let (server, addr) = serving(&db);
    let (status, thread) = http(&addr, "POST", "/threads", r#"{"thread_id": "from-http"}"#);
    assert_eq!(status, 200, "{thread}");
    let run = r#"{"assistant_id": "pipeline", "input": {"topic": "sled"}}"#;
    let (status, out) = http(&addr, "POST", "/threads/from-http/runs/wait", run);
    assert_eq!(status, 200, "{out}");
    assert!(
        out["__interrupt__"][0]["value"]["question"].is_string(),
        "{out}"
    );

    db.graph(&["resume", "from-http", "--resume", "yes"])
        .expect(0);
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");

    server.signal(libc::SIGTERM);
    let out = server.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("stopped"), "{}", out.stderr);
}

/// A setting the graph declares, given in a request's `configurable` or `context`, is checked as
/// `graph run --set` checks it, before a thread is made; the caller's own keys pass.
#[test]
fn a_declared_setting_of_the_wrong_type_is_refused_before_a_thread_is_made() {
    let db = Db::new();
    let (server, addr) = serving(&db);
    let wrong = [
        r#"{"assistant_id": "pipeline", "input": {"topic": "x"}, "config": {"configurable": {"step_ms": "abc"}}}"#,
        r#"{"assistant_id": "pipeline", "input": {"topic": "x"}, "context": {"step_ms": -1}}"#,
    ];
    for body in wrong {
        let (status, out) = http(&addr, "POST", "/runs/wait", body);
        assert_eq!(status, 422, "{out}");
        let message = out["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("setting `step_ms` expects a whole number"),
            "{out}"
        );
    }
    let (status, out) = http(&addr, "POST", "/threads", r#"{"thread_id": "kept"}"#);
    assert_eq!(status, 200, "{out}");
    let (status, out) = http(&addr, "POST", "/threads/kept/runs/wait", wrong[0]);
    assert_eq!(status, 422, "{out}");
    assert_eq!(db.thread_ids(), ["kept"], "the refused runs made no thread");
    let (_, thread) = http(&addr, "GET", "/threads/kept", "");
    assert_eq!(
        thread["values"],
        serde_json::Value::Null,
        "nor a checkpoint: {thread}"
    );

    let own = r#"{"assistant_id": "pipeline", "input": {"topic": "x"}, "config": {"configurable": {"step_ms": 1, "user_id": "ada"}}}"#;
    let (status, out) = http(&addr, "POST", "/threads/kept/runs/wait", own);
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["topic"], "x", "{out}");

    server.signal(libc::SIGTERM);
    assert_eq!(server.finish().code, Some(0));
}

/// The server's `/store` routes reach the long-term store beside the command's threads: what
/// `graph store put` left is read over HTTP, what a client puts is there for `graph store get`
/// once the server stops; while it runs (and holds the store), that command says to go through
/// the server, and a second server answers its `/store` requests with 503.
#[test]
fn the_store_a_client_reaches_through_the_server_is_the_one_the_cli_keeps() {
    let db = Db::new();
    db.graph(&["store", "put", "users/ada", "tone", r#"{"tone": "brief"}"#])
        .expect(0);
    let (server, addr) = serving(&db);
    let (status, item) = http(
        &addr,
        "GET",
        "/store/items?namespace=users.ada&key=tone",
        "",
    );
    assert_eq!(status, 200, "{item}");
    assert_eq!(item["value"]["tone"], "brief", "{item}");
    let put = r#"{"namespace": ["users", "bo"], "key": "tone", "value": {"tone": "long"}}"#;
    let (status, out) = http(&addr, "PUT", "/store/items", put);
    assert_eq!(status, 204, "{out}");

    db.graph(&["store", "get", "users/bo", "tone"])
        .expect(1)
        .stderr_has(&["another process has it open", "GET /store/items?namespace="]);
    // A second server over the same folder serves its threads; the items it cannot open yet
    // are a 503 that says why, not a failure of the server.
    let (second, other) = serving(&db);
    let (status, out) = http(
        &other,
        "GET",
        "/store/items?namespace=users.bo&key=tone",
        "",
    );
    assert_eq!(status, 503, "{out}");
    let message = out["message"].as_str().unwrap_or_default();
    assert!(message.contains("another process has it open"), "{out}");
    second.signal(libc::SIGTERM);
    assert_eq!(second.finish().code, Some(0));

    server.signal(libc::SIGTERM);
    assert_eq!(server.finish().code, Some(0));
    let kept = db
        .graph(&["store", "get", "users/bo", "tone", "--json"])
        .expect(0)
        .json();
    assert_eq!(kept["value"]["tone"], "long", "{kept}");
}
