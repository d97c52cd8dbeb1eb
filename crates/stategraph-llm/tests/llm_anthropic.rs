//! The Anthropic client against a local server speaking the Messages API.

#[path = "../../../tests/support/fake_http.rs"]
mod fake_http;

use std::time::{Duration, Instant};

use fake_http::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph_llm::anthropic::{AnthropicChat, AnthropicConfig};
use stategraph_llm::http::HttpError;
use stategraph_llm::{
    schema_for, structured, ChatModel, ChatRequest, FinishReason, LlmError, Message,
    StructuredOptions, ToolSpec, Usage,
};

const ROUTE: &str = "/v1/messages";
const KEY: &str = "sk-ant-test-0123456789";

fn client(server: &MockServer) -> AnthropicChat {
    AnthropicChat::new(
        AnthropicConfig::new("claude-test")
            .with_base_url(server.uri())
            .with_api_key(KEY)
            .with_http(fast_http()),
    )
    .expect("client")
}

fn message(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 7, "cache_read_input_tokens": 5}
    })
}

fn text(reply: &str) -> Value {
    message(json!([{"type": "text", "text": reply}]), "end_turn")
}

fn ask(question: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::system("Be brief."), Message::user(question)])
}

#[tokio::test]
async fn chat_lifts_the_system_prompt_and_returns_text_and_usage() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 1, json(text("Paris."))).await;

    let reply = client(&server)
        .chat(ask("Capital of France?").with_temperature(0.5))
        .await
        .unwrap();

    assert_eq!(reply.message.content, "Paris.");
    assert_eq!(
        reply.usage,
        Usage::new(30, 7),
        "cached prompt tokens count as input"
    );
    assert_eq!(reply.model, "claude-test-20250101");
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));

    let sent = &requests(&server).await[0];
    assert_eq!(header(sent, "x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        header(sent, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}],
            "temperature": 0.5
        })
    );
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Verdict {
    source_id: String,
    confident: bool,
}

fn forced_tool_reply(input: Value) -> Value {
    message(
        json!([{"type": "tool_use", "id": "toolu_1", "name": "Verdict", "input": input}]),
        "tool_use",
    )
}

#[tokio::test]
async fn structured_output_forces_a_tool_call_with_the_schema() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(forced_tool_reply(
            json!({"source_id": "s2", "confident": true}),
        )),
    )
    .await;
    let model = client(&server);

    let (verdict, usage): (Verdict, _) = structured(
        &model,
        vec![Message::user("Which source?")],
        StructuredOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(verdict.source_id, "s2");
    assert!(verdict.confident);
    assert_eq!(usage, Usage::new(30, 7));
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "Verdict"})
    );
    let tool = &body["tools"][0];
    assert_eq!(tool["name"], "Verdict");
    assert_eq!(tool["input_schema"]["type"], "object");
    assert_eq!(tool["input_schema"]["additionalProperties"], false);
}

#[tokio::test]
async fn structured_output_retries_when_a_run_time_enum_is_violated() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(forced_tool_reply(
            json!({"source_id": "s9", "confident": true}),
        )),
    )
    .await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(forced_tool_reply(
            json!({"source_id": "s1", "confident": false}),
        )),
    )
    .await;
    let model = client(&server);
    let mut schema = schema_for::<Verdict>();
    schema["properties"]["source_id"]["enum"] = json!(["s1", "s2"]);

    let (verdict, usage): (Verdict, _) = structured(
        &model,
        vec![Message::user("Which source?")],
        StructuredOptions::default()
            .with_schema(schema)
            .with_name("Verdict"),
    )
    .await
    .unwrap();

    assert_eq!(verdict.source_id, "s1");
    assert_eq!(
        usage,
        Usage::new(30, 7) + Usage::new(30, 7),
        "usage of both attempts, two requests"
    );
    let second = &bodies(&server).await[1];
    assert_eq!(
        second["tools"][0]["input_schema"]["properties"]["source_id"]["enum"],
        json!(["s1", "s2"])
    );
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant");
    let correction = messages[2]["content"][0]["text"].as_str().unwrap();
    assert!(correction.contains("must be one of"), "{correction}");
}

#[tokio::test]
async fn tool_use_blocks_become_tool_calls_and_results_go_back_as_tool_result() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(message(
            json!([
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"query": "tides"}}
            ]),
            "tool_use",
        )),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(text("The moon."))).await;
    let model = client(&server);
    let search = ToolSpec::new(
        "search",
        "Search the web",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    );

    let mut messages = vec![Message::user("What drives tides?")];
    let first = model
        .chat(ChatRequest::new(messages.clone()).with_tools(vec![search.clone()]))
        .await
        .unwrap();
    assert_eq!(first.message.content, "Let me look.");
    assert_eq!(first.finish_reason, Some(FinishReason::ToolCalls));
    let call = first.message.tool_calls[0].clone();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("toolu_9", "search")
    );
    assert_eq!(call.arguments, json!({"query": "tides"}));

    messages.push(first.message);
    messages.push(Message::tool_result(&call.id, "gravity of the moon"));
    let second = model
        .chat(ChatRequest::new(messages).with_tools(vec![search]))
        .await
        .unwrap();
    assert_eq!(second.message.content, "The moon.");

    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tools"],
        json!([{"name": "search", "description": "Search the web",
                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}])
    );
    assert_eq!(
        sent[1]["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"query": "tides"}}
        ]})
    );
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "gravity of the moon"}
        ]})
    );
}

fn event(kind: &str, data: Value) -> (Option<&str>, String) {
    (Some(kind), data.to_string())
}

fn stream_start() -> (Option<&'static str>, String) {
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-20250101",
            "content": [], "stop_reason": null,
            "usage": {"input_tokens": 25, "output_tokens": 1}
        }}),
    )
}

#[tokio::test]
async fn streaming_passes_text_deltas_in_order_and_reads_usage() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            stream_start(),
            event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            event("ping", json!({"type": "ping"})),
            event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}})),
            event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo!"}})),
            event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 6}})),
            event("message_stop", json!({"type": "message_stop"})),
        ]),
    )
    .await;
    let (sink, seen) = recording_sink();

    let reply = client(&server)
        .chat(ask("Greet").with_stream(sink))
        .await
        .unwrap();

    assert_eq!(*seen.lock().unwrap(), ["Hel", "lo!"]);
    assert_eq!(reply.message.content, "Hello!");
    assert_eq!(reply.usage, Usage::new(25, 6));
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    assert_eq!(bodies(&server).await[0]["stream"], true);
}

#[tokio::test]
async fn streaming_assembles_tool_input_from_json_deltas() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            stream_start(),
            event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}})),
            event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"ti"}})),
            event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "des\"}"}})),
            event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}})),
            event("message_stop", json!({"type": "message_stop"})),
        ]),
    )
    .await;
    let (sink, seen) = recording_sink();

    let reply = client(&server)
        .chat(ask("Tides?").with_stream(sink))
        .await
        .unwrap();

    assert!(
        seen.lock().unwrap().is_empty(),
        "tool input of an ordinary tool is not text"
    );
    assert_eq!(
        reply.message.tool_calls[0].arguments,
        json!({"query": "tides"})
    );
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn an_overloaded_error_mid_stream_is_transient() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            stream_start(),
            event("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ]),
    )
    .await;
    let (sink, _) = recording_sink();

    let err = client(&server)
        .chat(ask("hi").with_stream(sink))
        .await
        .unwrap_err();

    assert!(err.to_string().contains("overloaded_error"), "{err}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn overloaded_529_and_rate_limit_are_retried() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(529).set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    )
    .await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(429).insert_header("retry-after", "0"),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(text("ok"))).await;

    let reply = client(&server).chat(ask("hi")).await.unwrap();

    assert_eq!(reply.message.content, "ok");
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(text("ok"))).await;

    let started = Instant::now();
    client(&server).chat(ask("hi")).await.unwrap();

    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn persistent_server_errors_fail_after_bounded_retries() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 100, ResponseTemplate::new(500).set_body_json(json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}))).await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert_eq!(requests(&server).await.len(), 3);
    assert!(
        matches!(
            err,
            LlmError::Http(HttpError::Server {
                status: 500,
                attempts: 3,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        100,
        json(text("late")).set_delay(Duration::from_secs(3)),
    )
    .await;
    let mut http = fast_http();
    http.read_timeout = Duration::from_millis(100);
    http.retry.max_retries = 0;
    let model = AnthropicChat::new(
        AnthropicConfig::new("claude-test")
            .with_base_url(server.uri())
            .with_api_key(KEY)
            .with_http(http),
    )
    .unwrap();

    let err = model.chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Http(HttpError::Timeout { .. })),
        "{err:?}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn unauthorized_names_provider_url_and_model_but_never_the_key() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    let text = err.to_string();
    assert!(text.starts_with("Anthropic at "), "{text}");
    assert!(
        text.contains(&server.uri()) && text.contains("claude-test"),
        "{text}"
    );
    assert!(
        text.contains("ANTHROPIC_API_KEY") && text.contains("invalid x-api-key"),
        "{text}"
    );
    assert!(!text.contains(KEY) && !format!("{err:?}").contains(KEY));
    assert!(!err.is_transient());
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html"),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Http(HttpError::InvalidBody { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("<html>gateway"), "{err}");
}

#[tokio::test]
async fn malformed_stream_events_are_a_clear_error() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            stream_start(),
            (Some("content_block_delta"), "{not json".to_string()),
        ]),
    )
    .await;
    let (sink, _) = recording_sink();

    let err = client(&server)
        .chat(ask("hi").with_stream(sink))
        .await
        .unwrap_err();

    assert!(err.to_string().contains("not the expected JSON"), "{err}");
}

/// Runs against the real API when `ANTHROPIC_API_KEY` is set:
/// `cargo test --test llm_anthropic -- --ignored`.
#[tokio::test]
#[ignore = "needs ANTHROPIC_API_KEY and network"]
async fn real_anthropic_api() {
    if std::env::var("ANTHROPIC_API_KEY")
        .map(|k| k.is_empty())
        .unwrap_or(true)
    {
        eprintln!("ANTHROPIC_API_KEY is not set; skipping");
        return;
    }
    let model = AnthropicChat::new(AnthropicConfig::from_env(None).unwrap()).unwrap();
    let (sink, seen) = recording_sink();
    let reply = model
        .chat(ChatRequest::new(vec![Message::user("Say hello in three words.")]).with_stream(sink))
        .await
        .unwrap();
    assert!(!reply.message.content.is_empty());
    assert!(!seen.lock().unwrap().is_empty());

    let (verdict, _): (Verdict, _) = structured(
        &model,
        vec![Message::user(
            "Sources: s1 (old), s2 (new). Pick the newest; answer with its id.",
        )],
        StructuredOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(verdict.source_id, "s2");
}

/// Two `tool_use` blocks in one reply are two calls, answered by two `tool_result` blocks in
/// one user turn; forbidding parallel calls sets `disable_parallel_tool_use`.
#[tokio::test]
async fn parallel_tool_use_blocks_are_answered_in_one_turn_in_call_order() {
    use stategraph_llm::ToolChoice;
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(message(
            json!([
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.txt"}}
            ]),
            "tool_use",
        )),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(text("Both read."))).await;
    let model = client(&server);
    let read = ToolSpec::new(
        "read_file",
        "Read a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    );
    let mut messages = vec![Message::user("Read a.txt and b.txt")];
    let first = model
        .chat(ChatRequest::new(messages.clone()).with_tools(vec![read.clone()]))
        .await
        .unwrap();
    let calls = first.message.tool_calls.clone();
    assert_eq!(calls.len(), 2);
    messages.push(first.message);
    messages.push(Message::tool_result("toolu_1", "A"));
    messages.push(Message::tool_result(
        "toolu_2",
        "Error: b.txt does not exist",
    ));
    model
        .chat(
            ChatRequest::new(messages)
                .with_tools(vec![read])
                .with_tool_choice(ToolChoice::Required)
                .with_parallel_tool_calls(false),
        )
        .await
        .unwrap();
    let sent = bodies(&server).await;
    assert!(sent[0].get("tool_choice").is_none());
    assert_eq!(
        sent[1]["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error: b.txt does not exist"}
        ]})
    );
}
