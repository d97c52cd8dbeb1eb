//! A tiny harness over wiremock for the model and tool client tests: local servers on
//! 127.0.0.1 that answer in each provider's real wire format, plus helpers to read back what
//! the client sent.
//!
//! Include with `#[path = "support/fake_http.rs"] mod fake_http;`.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use serde_json::Value;
use stategraph_llm::http::HttpSettings;
use stategraph_llm::TokenSink;
pub use wiremock::matchers::{method, path};
pub use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// Timeouts and backoff measured in milliseconds, so failure paths stay fast: two retries,
/// 1-5 ms backoff, `Retry-After` honoured up to 2 s.
pub fn fast_http() -> HttpSettings {
    HttpSettings::for_tests()
}

/// A JSON response with status 200.
pub fn json(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

/// A `text/event-stream` response. Each event is `(event name, data)`; the data is sent
/// verbatim (a JSON object's text, or `[DONE]`).
pub fn sse(events: &[(Option<&str>, String)]) -> ResponseTemplate {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            body.push_str(&format!("event: {name}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream")
}

/// Mounts `response` for the next `times` requests to `POST route`, after any mocks already
/// mounted (wiremock serves the first mounted mock that still matches).
pub async fn answer_post(server: &MockServer, route: &str, times: u64, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(response)
        .up_to_n_times(times)
        .mount(server)
        .await;
}

/// The requests the server received.
pub async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

/// The JSON bodies of the requests the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    requests(server)
        .await
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

/// A header of a received request, as text.
pub fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A token sink that records each delta, and the record.
pub fn recording_sink() -> (TokenSink, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let sink: TokenSink = Arc::new(move |delta: &str| {
        record.lock().unwrap().push(delta.to_string());
    });
    (sink, seen)
}

/// A base URL on 127.0.0.1 where nothing listens.
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}
