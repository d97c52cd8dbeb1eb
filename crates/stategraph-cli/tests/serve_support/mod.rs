//! What the `graph serve` load, fault and Postgres tests share: the address a started server
//! announces, JSON calls, and a run's Server-Sent Events read to their end with their ids.

#![allow(dead_code)]

use futures::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

/// One Server-Sent Event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// The address in a `graph serve` banner (`serving ... on http://ADDR`).
pub fn announced_addr(stderr: &str) -> String {
    stderr
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the address it serves on")
        .to_string()
}

/// A client with a bound on every request (streams are bounded by their callers).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(64)
        .build()
        .expect("an HTTP client")
}

/// `METHOD base+path` with a JSON body; its status and JSON answer.
pub async fn call(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http
        .request(method, format!("{base}{path}"))
        .timeout(Duration::from_secs(30));
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.expect("the server answers");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A pipeline run request: its steps taking `step_ms`, approved without a pause.
pub fn pipeline_run(step_ms: u64, modes: &[&str]) -> Value {
    json!({
        "assistant_id": "pipeline",
        "input": {"topic": "sled"},
        "config": {"configurable": {"step_ms": step_ms, "yes": true}},
        "stream_mode": modes,
    })
}

/// Parses one SSE block (`event:`, `data:`, `id:` lines); `None` for a keep-alive comment.
fn parse(block: &str) -> Option<Event> {
    let (mut id, mut event, mut data) = (None, String::from("message"), String::new());
    let mut any = false;
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = value.parse().ok(),
            "event" => event = value.to_string(),
            "data" => {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => continue,
        }
        any = true;
    }
    any.then(|| Event {
        id,
        event,
        data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
    })
}

/// Reads an SSE response, handing each event to `each` until it returns false or the
/// stream ends; the events read.
pub async fn read_events(
    res: reqwest::Response,
    mut each: impl FnMut(&Event) -> bool,
) -> Vec<Event> {
    let mut body = res.bytes_stream();
    let mut buf = String::new();
    let mut events = Vec::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(at) = buf.find("\n\n") {
            let block: String = buf.drain(..at + 2).collect();
            if let Some(event) = parse(&block) {
                let more = each(&event);
                events.push(event);
                if !more {
                    return events;
                }
            }
        }
    }
    events
}

/// `GET` a run's stream (after `last_id` when given) and reads it to its end.
pub async fn join_stream(
    http: &reqwest::Client,
    base: &str,
    thread: &str,
    run: &str,
    last_id: Option<u64>,
) -> Vec<Event> {
    let mut req = http.get(format!("{base}/threads/{thread}/runs/{run}/stream"));
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let res = req.send().await.expect("the stream opens");
    assert_eq!(res.status().as_u16(), 200, "stream of run {run}");
    read_events(res, |_| true).await
}

/// Asserts the events' ids run 0, 1, 2... (from `first`) with none missing or repeated, and the
/// last is `end`; its status.
pub fn check_complete(events: &[Event], first: u64, what: &str) -> String {
    let ids: Vec<u64> = events.iter().map(|e| e.id.expect("an id")).collect();
    let want: Vec<u64> = (first..first + ids.len() as u64).collect();
    assert_eq!(ids, want, "{what}: event ids");
    let last = events.last().unwrap_or_else(|| panic!("{what}: no events"));
    assert_eq!(last.event, "end", "{what}: {events:?}");
    last.data["status"].as_str().unwrap_or_default().to_string()
}
