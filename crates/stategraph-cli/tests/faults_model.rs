//! A model server that is down or failing, seen through the real `graph` binary: a server that
//! is not there fails the run at once with "cannot reach the model at URL"; a failing one is
//! retried at one layer only (the HTTP client's), and only for errors worth retrying.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, TestCommand};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server on 127.0.0.1 answering every request with `status` (and `Retry-After: 0`, so the
/// client's retries cost no waiting), counting what it receives.
struct FailingServer {
    port: u16,
    requests: Arc<AtomicUsize>,
}

impl FailingServer {
    fn start(status: &'static str) -> FailingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let count = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = reader.read_exact(&mut body);
                    count.fetch_add(1, Ordering::SeqCst);
                    let text = "{\"error\": {\"message\": \"try later\"}}";
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nretry-after: 0\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = reader.get_mut().write_all(reply.as_bytes());
                });
            }
        });
        FailingServer { port, requests }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// A base URL where nothing listens.
fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1")
}

/// `graph run research` on a one-file local corpus, with the model at `base_url`.
fn research(db: &Db, corpus: &std::path::Path, base_url: &str) -> TestCommand {
    let corpus = format!("search.corpus={}", corpus.display());
    db.graph(&[
        "run",
        "research",
        "--input",
        "How does sled flush?",
        "--yes",
        "--set",
        &corpus,
    ])
    .with_model_at(base_url)
}

fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("sled.md"),
        "# sled\nsled flushes every 500 ms.\n",
    )
    .expect("write corpus");
    dir
}

#[test]
fn a_model_server_that_is_down_fails_the_run_at_once_naming_its_url() {
    let db = Db::new();
    let docs = corpus();
    let url = dead_url();
    let started = Instant::now();
    let out = research(&db, docs.path(), &url).expect(1);
    let took = started.elapsed();
    out.stderr_has(&[
        &format!("cannot reach the model at {url}"),
        "connection refused",
        "after 1 attempt:",
    ]);
    assert!(
        !out.stderr.contains("usable plan"),
        "an unreachable model is not a bad plan\n{out}"
    );
    assert!(
        took < Duration::from_secs(2),
        "took {took:?} to fail on a refused connection\n{out}"
    );
}

#[test]
fn a_failing_model_server_is_retried_by_the_http_client_alone() {
    let db = Db::new();
    let docs = corpus();
    let server = FailingServer::start("503 Service Unavailable");
    let out = research(&db, docs.path(), &server.base_url()).expect(1);
    out.stderr_has(&["HTTP 503 after 4 attempts", "after 1 attempt:"]);
    assert!(!out.stderr.contains("usable plan"), "{out}");
    // One first try and the HTTP client's three retries; the node does not retry them again.
    assert_eq!(server.requests(), 4, "{out}");
}

#[test]
fn a_request_the_server_rejects_is_not_retried_at_all() {
    let db = Db::new();
    let docs = corpus();
    let server = FailingServer::start("400 Bad Request");
    let out = research(&db, docs.path(), &server.base_url()).expect(1);
    out.stderr_has(&["rejected the request with HTTP 400"]);
    assert_eq!(server.requests(), 1, "{out}");
}
