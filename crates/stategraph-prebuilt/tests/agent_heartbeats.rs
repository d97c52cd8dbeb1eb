//! The prebuilt agent under an idle timeout (`AgentOptions::with_idle_timeout`), against the
//! real OpenAI client and a Chat Completions server on 127.0.0.1 that streams its replies
//! slowly: a model reply that streams for longer than the timeout, and a tool call that runs
//! longer than it, keep their nodes alive by themselves; a stream that stalls is cut off and
//! the model node's retry policy calls again.

use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph::runtime::{Event, RunConfig};
use stategraph_llm::openai::{OpenAiChat, OpenAiConfig};
use stategraph_llm::Message;
use stategraph_prebuilt::{agent, AgentOptions, AgentStateUpdate};
use stategraph_tools::{tool_fn, ToolFailure, Toolbox};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The idle timeout of the agent's nodes; every gap the tests mean to survive is an eighth
/// of it, so a loaded machine does not turn a live stream into a silent one.
const IDLE: Duration = Duration::from_secs(2);
const GAP: Duration = Duration::from_millis(250);

/// What the server sends for its n-th request (from 0).
#[derive(Clone, Copy)]
enum Reply {
    /// A call of the `slow` tool, streamed at once.
    CallSlowTool,
    /// The answer, one word per chunk, `GAP` apart (two seconds in all).
    SlowAnswer,
    /// One word, then nothing for three idle timeouts.
    Stall,
}

/// A Chat Completions server that streams `script`'s replies, in order, and counts requests.
struct SlowServer {
    port: u16,
    requests: Arc<AtomicUsize>,
}

impl SlowServer {
    fn start(script: Vec<Reply>) -> SlowServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let reply = script.get(n).copied().unwrap_or(Reply::SlowAnswer);
                std::thread::spawn(move || answer(stream, reply));
            }
        });
        SlowServer { port, requests }
    }

    fn model(&self) -> Arc<OpenAiChat> {
        let config = OpenAiConfig::new("gpt-test")
            .with_base_url(format!("http://127.0.0.1:{}/v1", self.port))
            .with_api_key("sk-test");
        Arc::new(OpenAiChat::new(config).unwrap())
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one request (headers and body) and streams `reply` as Chat Completions chunks.
fn answer(stream: TcpStream, reply: Reply) {
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
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut stream = reader.into_inner();
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let chunk = |delta: Value, finish: Option<&str>| {
        let data =
            json!({"model": "gpt-test", "choices": [{"delta": delta, "finish_reason": finish}]});
        format!("data: {data}\n\n")
    };
    let mut send = |text: &str| {
        stream
            .write_all(text.as_bytes())
            .and_then(|()| stream.flush())
    };
    if send(head).is_err() {
        return;
    }
    match reply {
        Reply::CallSlowTool => {
            let call = json!({"tool_calls": [{"index": 0, "id": "call_1",
                "function": {"name": "slow", "arguments": "{}"}}]});
            let _ = send(&chunk(call, None));
            let _ = send(&chunk(json!({}), Some("tool_calls")));
        }
        Reply::SlowAnswer => {
            for word in [
                "It", " took", " a", " while", " but", " here", " it", " is.",
            ] {
                std::thread::sleep(GAP);
                if send(&chunk(json!({"content": word}), None)).is_err() {
                    return;
                }
            }
            let _ = send(&chunk(json!({}), Some("stop")));
        }
        Reply::Stall => {
            let _ = send(&chunk(json!({"content": "Hmm"}), None));
            std::thread::sleep(IDLE * 3);
            let _ = send(&chunk(json!({"content": " (too late)"}), Some("stop")));
        }
    }
    let _ = send("data: [DONE]\n\n");
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A tool that works for `took` before it answers, counting its calls.
fn slow_tool(took: Duration, calls: Arc<AtomicUsize>) -> Toolbox {
    Toolbox::new(vec![tool_fn("slow", "Takes its time", move |_: NoArgs| {
        let calls = calls.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(took).await;
            Ok::<_, ToolFailure>("found it".to_string())
        }
    })])
}

fn question() -> AgentStateUpdate {
    AgentStateUpdate::default().messages(vec![Message::user("Find it, however long it takes")])
}

#[tokio::test]
async fn a_long_tool_call_and_a_long_model_stream_keep_their_nodes_alive() {
    let server = SlowServer::start(vec![Reply::CallSlowTool, Reply::SlowAnswer]);
    let tool_calls = Arc::new(AtomicUsize::new(0));
    // The tool works for twice the idle timeout; the answer streams for as long as it.
    let tools = slow_tool(IDLE * 2, tool_calls.clone());
    let options = AgentOptions::default().with_idle_timeout(IDLE);
    let graph = agent(server.model(), tools, options).compile().unwrap();
    let out = graph
        .invoke(question(), RunConfig::new())
        .await
        .expect("neither node was silent");
    assert_eq!(out.state.answer(), Some("It took a while but here it is."));
    assert_eq!(tool_calls.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(
        server.requests(),
        2,
        "no model call was cut off and made again"
    );
}

#[tokio::test]
async fn a_stalled_model_stream_is_cut_off_and_the_model_node_retries() {
    let server = SlowServer::start(vec![Reply::Stall, Reply::SlowAnswer]);
    let options = AgentOptions::default().with_idle_timeout(IDLE);
    let graph = agent(server.model(), Toolbox::default(), options)
        .compile()
        .unwrap();
    let mut stream = graph.stream(question(), RunConfig::new());
    let mut failed = Vec::new();
    while let Some(event) = stream.next().await {
        if let Event::NodeFailed {
            node,
            error,
            will_retry,
            ..
        } = event
        {
            failed.push((node, error, will_retry));
        }
    }
    let out = stream.outcome().await.unwrap();
    assert_eq!(out.state.answer(), Some("It took a while but here it is."));
    assert_eq!(server.requests(), 2, "the stalled call, then its retry");
    let [(node, error, true)] = &failed[..] else {
        panic!("expected one retried failure, got {failed:?}");
    };
    assert_eq!(node, "agent");
    assert!(error.contains("idle timeout of 2s"), "{error}");
}
