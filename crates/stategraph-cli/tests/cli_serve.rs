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
    let mut server = db.graph(&["serve", "--addr", "127.0.0.1:0"]).spawn();
    server.wait_for("serving");
    let stderr = server.stderr();
    let addr = stderr
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the address it serves on")
        .to_string();
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
