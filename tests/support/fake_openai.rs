//! A tiny OpenAI-compatible Chat Completions server on 127.0.0.1, in the test process, for
//! driving the real `graph` binary through the research agent without a network or a key.
//!
//! It answers each request by what it asks for: the structured-output schema name (`Plan`,
//! `PlanUpdate`, `Split`) or, for plain calls, the prompt (a summary of a `Task:`, or the final
//! answer); [`FakeOpenAi::answering`] answers with a function of the request instead (the
//! task-tree agent's `TaskPlan` and `Solve` calls are classified by the task file they name). Every request is recorded as a [`Call`], so a test can count what the binary paid
//! for; [`FakeOpenAi::hold`] keeps chosen requests waiting (no reply) until
//! [`FakeOpenAi::release`], so a test can kill the binary while it waits on the model.
//!
//! ```ignore
//! let server = FakeOpenAi::start(plan_json, |todo_id| json!({"task_outcome": "ok", "status": "done", "new_tasks": []}));
//! cmd.env("OPENAI_BASE_URL", server.base_url()).env("OPENAI_API_KEY", "sk-test");
//! assert_eq!(server.count("Summary", "What is the Tokio runtime"), 1);
//! ```
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Starts a reply that calls tools instead of answering in text (see [`tool_calls`]).
const TOOL_CALLS: &str = "\u{1}tool_calls:";

/// A reply for an [`FakeOpenAi::answering`] function that calls tools, `(name, arguments)`
/// each, with ids `call_1`, `call_2`...; the server sends it as the wire's `tool_calls`.
pub fn tool_calls(calls: &[(&str, Value)]) -> String {
    let list: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"id": format!("call_{}", i + 1), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    format!("{TOOL_CALLS}{}", Value::Array(list))
}

/// How long a test waits for a request it expects.
const PATIENCE: Duration = Duration::from_secs(60);

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Call {
    /// `Plan`, `PlanUpdate`, `Split`, `TaskPlan` (by schema name), `Answer`, `Solve` or
    /// `Summary` (by prompt).
    pub kind: String,
    /// What it is about: the task of a `Summary` or `Split`, the todo id of a `PlanUpdate`, the
    /// task file of a `TaskPlan` or a `Solve`, empty for `Plan` and `Answer`.
    pub key: String,
    /// The request body.
    pub body: Value,
}

type Verdict = Box<dyn Fn(&str) -> Value + Send + Sync>;
type Hold = Box<dyn Fn(&Call) -> bool + Send + Sync>;
type Respond = Box<dyn Fn(&Call) -> String + Send + Sync>;
type Override = Box<dyn Fn(&Call) -> Option<String> + Send + Sync>;

struct Inner {
    plan: Value,
    verdict: Verdict,
    /// Answers every request when set (instead of the research agent's script).
    respond: Option<Respond>,
    /// Answers the requests it returns a reply for, before the script.
    first: Option<Override>,
    calls: Mutex<Vec<Call>>,
    hold: Mutex<Option<Hold>>,
    /// Signalled when a call is recorded (waits on `calls`).
    changed: Condvar,
    /// Signalled on release (waits on `hold`); a condvar serves one mutex only.
    released: Condvar,
}

/// The server. It lives as long as the test process; each test starts its own.
pub struct FakeOpenAi {
    port: u16,
    inner: Arc<Inner>,
}

/// The calls as `kind key` lines, for readable assertion messages.
pub fn kinds(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .map(|c| format!("{} {}", c.kind, c.key))
        .collect()
}

impl FakeOpenAi {
    /// Starts a server that plans `plan` (a `Plan` reply: `{"todos": [...]}`) and reviews todo
    /// `id` with `verdict(id)` (a `PlanUpdate` without `completed_task_id`, which is filled in).
    pub fn start(plan: Value, verdict: impl Fn(&str) -> Value + Send + Sync + 'static) -> Self {
        Self::serve(plan, Box::new(verdict), None, None)
    }

    /// Like [`start`](Self::start), but a request for which `first(call)` gives a reply gets
    /// that reply instead (e.g. an invalid structured reply, to provoke a retry).
    pub fn start_overriding(
        plan: Value,
        verdict: impl Fn(&str) -> Value + Send + Sync + 'static,
        first: impl Fn(&Call) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self::serve(plan, Box::new(verdict), None, Some(Box::new(first)))
    }

    /// Starts a server that answers every request with `respond(call)` (the reply's text: JSON
    /// for a structured request).
    pub fn answering(respond: impl Fn(&Call) -> String + Send + Sync + 'static) -> Self {
        Self::serve(
            Value::Null,
            Box::new(|_| Value::Null),
            Some(Box::new(respond)),
            None,
        )
    }

    fn serve(
        plan: Value,
        verdict: Verdict,
        respond: Option<Respond>,
        first: Option<Override>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let inner = Arc::new(Inner {
            plan,
            verdict,
            respond,
            first,
            calls: Mutex::new(Vec::new()),
            hold: Mutex::new(None),
            changed: Condvar::new(),
            released: Condvar::new(),
        });
        let shared = inner.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let inner = shared.clone();
                std::thread::spawn(move || serve(stream, &inner));
            }
        });
        FakeOpenAi { port, inner }
    }

    /// `OPENAI_BASE_URL` for the binary.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// How many requests of `kind` about `key` arrived.
    pub fn count(&self, kind: &str, key: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.kind == kind && c.key == key)
            .count()
    }

    /// The keys of the requests of `kind`, in order.
    pub fn keys(&self, kind: &str) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| c.key.clone())
            .collect()
    }

    /// From now on, requests matching `when` get no reply until [`release`](Self::release).
    pub fn hold(&self, when: impl Fn(&Call) -> bool + Send + Sync + 'static) {
        *self.inner.hold.lock().unwrap() = Some(Box::new(when));
    }

    /// Lets held requests (and all later ones) through.
    pub fn release(&self) {
        *self.inner.hold.lock().unwrap() = None;
        self.inner.released.notify_all();
    }

    /// Waits until a request matching `what` has arrived; fails the test after a while.
    pub fn wait_for(&self, what: impl Fn(&Call) -> bool) {
        let start = Instant::now();
        let mut calls = self.inner.calls.lock().unwrap();
        while !calls.iter().any(&what) {
            assert!(
                start.elapsed() < PATIENCE,
                "the expected request never came; got: {:?}",
                calls.iter().map(|c| (&c.kind, &c.key)).collect::<Vec<_>>()
            );
            calls = self
                .inner
                .changed
                .wait_timeout(calls, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }
}

fn serve(stream: TcpStream, inner: &Inner) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut length = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if first {
            first = false;
            continue;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let streamed = body["stream"].as_bool().unwrap_or(false);
    let call = classify(body);
    let content = reply(inner, &call);
    {
        let mut calls = inner.calls.lock().unwrap();
        calls.push(call.clone());
        inner.changed.notify_all();
    }
    // A held request waits here, its client still connected, until released.
    let mut hold = inner.hold.lock().unwrap();
    while hold.as_ref().is_some_and(|h| h(&call)) {
        hold = inner
            .released
            .wait_timeout(hold, Duration::from_millis(100))
            .unwrap()
            .0;
    }
    drop(hold);
    let calls: Option<Value> = content
        .strip_prefix(TOOL_CALLS)
        .map(|list| serde_json::from_str(list).expect("tool_calls() wrote it"));
    let finish = if calls.is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let response = if streamed {
        // Chat Completions streaming: one SSE chunk per word (or one with the tool calls), a
        // usage chunk, then [DONE].
        let mut deltas: Vec<Value> = Vec::new();
        match &calls {
            Some(Value::Array(list)) => {
                let indexed: Vec<Value> = list
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut c = c.clone();
                        c["index"] = json!(i);
                        c
                    })
                    .collect();
                deltas.push(json!({"tool_calls": indexed}));
            }
            _ => deltas.extend(
                content
                    .split_inclusive(' ')
                    .map(|piece| json!({"content": piece})),
            ),
        }
        let mut events = String::new();
        for delta in deltas {
            let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            events.push_str(&format!("data: {chunk}\n\n"));
        }
        let last = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}});
        events.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{events}",
            events.len()
        )
    } else {
        let message = match &calls {
            Some(list) => json!({"role": "assistant", "content": null, "tool_calls": list}),
            None => json!({"role": "assistant", "content": content}),
        };
        let completion = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
        })
        .to_string();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{completion}",
            completion.len()
        )
    };
    let mut stream = stream;
    // The client may be gone (killed while waiting): nothing to do then.
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
}

fn message(body: &Value, index: usize) -> String {
    body["messages"][index]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn line_after(text: &str, prefix: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn classify(body: Value) -> Call {
    let format = &body["response_format"]["json_schema"];
    let (kind, key) = match format["name"].as_str() {
        Some("PlanUpdate") => {
            let id = format["schema"]["properties"]["completed_task_id"]["enum"][0]
                .as_str()
                .unwrap_or_default()
                .to_string();
            ("PlanUpdate".to_string(), id)
        }
        Some("Split") => (
            "Split".to_string(),
            line_after(&message(&body, 1), "Failed todo: "),
        ),
        Some("TaskPlan") => (
            "TaskPlan".to_string(),
            line_after(&message(&body, 1), "The task to decompose: "),
        ),
        Some(name) => (name.to_string(), String::new()),
        None if message(&body, 1).contains("\nYour task: ") => (
            "Solve".to_string(),
            line_after(&message(&body, 1), "Your task: "),
        ),
        None if message(&body, 0).starts_with("Write the final answer") => {
            ("Answer".to_string(), String::new())
        }
        None => (
            "Summary".to_string(),
            line_after(&message(&body, 1), "Task: "),
        ),
    };
    Call { kind, key, body }
}

/// The first source number `[n]` offered in a summary request.
fn first_source(user: &str) -> usize {
    user.split("Sources:")
        .nth(1)
        .and_then(|s| {
            let open = s.find('[')?;
            let close = s[open..].find(']')? + open;
            s[open + 1..close].parse().ok()
        })
        .unwrap_or(1)
}

fn reply(inner: &Inner, call: &Call) -> String {
    if let Some(respond) = &inner.respond {
        return respond(call);
    }
    if let Some(text) = inner.first.as_ref().and_then(|first| first(call)) {
        return text;
    }
    match call.kind.as_str() {
        "Plan" => inner.plan.to_string(),
        "PlanUpdate" => {
            let mut verdict = (inner.verdict)(&call.key);
            verdict["completed_task_id"] = json!(call.key);
            verdict.to_string()
        }
        "Split" => json!({"sub_tasks": [
            {"task": "find the flush interval of sled", "kind": "research"},
            {"task": "find what fsync does for sled", "kind": "research"}
        ]})
        .to_string(),
        "Answer" => {
            "Sled makes writes durable by flushing its log to disk [1]; Tokio is an asynchronous runtime [2].".to_string()
        }
        _ => format!(
            "The sources say: {} [{}].",
            call.key,
            first_source(&message(&call.body, 1))
        ),
    }
}
