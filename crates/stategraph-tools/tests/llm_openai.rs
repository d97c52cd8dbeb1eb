//! The OpenAI-compatible client against a local server speaking Chat Completions.

#[path = "../../../tests/support/fake_http.rs"]
mod fake_http;

use std::time::{Duration, Instant};

use fake_http::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph_llm::http::HttpError;
use stategraph_llm::openai::{OpenAiChat, OpenAiConfig};
use stategraph_llm::{
    structured, ChatModel, ChatRequest, FinishReason, LlmError, Message, StructuredOptions,
    ToolCall, ToolSpec, Usage,
};

const ROUTE: &str = "/v1/chat/completions";
const KEY: &str = "sk-test-0123456789abcdef";

fn client(server: &MockServer) -> OpenAiChat {
    OpenAiChat::new(
        OpenAiConfig::new("gpt-test")
            .with_base_url(format!("{}/v1", server.uri()))
            .with_api_key(KEY)
            .with_http(fast_http()),
    )
    .expect("client")
}

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test-2025",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    })
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::system("Be brief."), Message::user(text)])
}

#[tokio::test]
async fn chat_returns_the_reply_and_its_usage() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 1, json(completion("Paris."))).await;

    let reply = client(&server)
        .chat(
            ask("Capital of France?")
                .with_temperature(0.0)
                .with_max_tokens(50),
        )
        .await
        .unwrap();

    assert_eq!(reply.message.content, "Paris.");
    assert_eq!(reply.usage, Usage::new(12, 3));
    assert_eq!(reply.model, "gpt-test-2025");
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));

    let sent = &requests(&server).await[0];
    assert_eq!(
        header(sent, "authorization").as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Capital of France?"}
            ],
            "temperature": 0.0,
            "max_tokens": 50
        })
    );
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Plan {
    goal: String,
    steps: Vec<Step>,
    deadline: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Step {
    title: String,
    minutes: u32,
}

const PLAN_JSON: &str =
    r#"{"goal": "tea", "steps": [{"title": "boil", "minutes": 3}], "deadline": null}"#;

#[tokio::test]
async fn structured_output_is_sent_as_a_strict_json_schema_response_format() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 1, json(completion(PLAN_JSON))).await;
    let model = client(&server);

    let (plan, usage): (Plan, Usage) = structured(
        &model,
        vec![Message::user("Plan making tea")],
        StructuredOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(
        plan.steps[0],
        Step {
            title: "boil".into(),
            minutes: 3
        }
    );
    assert_eq!(usage, Usage::new(12, 3));
    let body = &bodies(&server).await[0];
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "Plan");
    assert_eq!(format["json_schema"]["strict"], true);
    let keys: Vec<&String> = format["json_schema"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3, "only name, schema and strict: {keys:?}");

    // Strict mode: no extra properties anywhere, and every property required, optional ones
    // included (they are nullable instead).
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema["additionalProperties"], false);
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["deadline", "goal", "steps"]);
    assert_eq!(
        schema["properties"]["deadline"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(
        schema["properties"]["steps"]["items"]["$ref"],
        "#/$defs/Step"
    );
    let step = &schema["$defs"]["Step"];
    assert_eq!(step["additionalProperties"], false);
    assert_eq!(step["required"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn structured_output_retries_with_the_parse_error_then_succeeds() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 1, json(completion(r#"{"goal": "tea"}"#))).await;
    answer_post(&server, ROUTE, 1, json(completion(PLAN_JSON))).await;
    let model = client(&server);

    let (plan, usage): (Plan, _) = structured(
        &model,
        vec![Message::user("Plan tea")],
        StructuredOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(plan.goal, "tea");
    assert_eq!(
        usage,
        Usage::new(12, 3) + Usage::new(12, 3),
        "usage of both attempts, two requests"
    );
    let second = &bodies(&server).await[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": r#"{"goal": "tea"}"#})
    );
    let correction = messages[2]["content"].as_str().unwrap();
    assert!(
        correction.contains("steps"),
        "the model is told what was wrong: {correction}"
    );
}

#[tokio::test]
async fn structured_output_gives_up_after_the_retry_budget() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        10,
        json(completion("I cannot do JSON today")),
    )
    .await;
    let model = client(&server);

    let err = structured::<Plan>(
        &model,
        vec![Message::user("Plan tea")],
        StructuredOptions::default().with_max_retries(1),
    )
    .await
    .unwrap_err();

    assert_eq!(requests(&server).await.len(), 2);
    match &err {
        LlmError::Structured {
            name,
            attempts,
            last_reply,
            error,
            usage,
        } => {
            assert_eq!(name, "Plan");
            assert_eq!(*attempts, 2);
            assert_eq!(usage.requests, 2, "both answered attempts are billed");
            assert_eq!(last_reply, "I cannot do JSON today");
            assert!(error.contains("not valid JSON"), "{error}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.is_transient());
}

#[tokio::test]
async fn tool_calls_are_parsed_and_results_sent_back_in_wire_format() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(json!({
            "model": "gpt-test",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "search", "arguments": "{\"query\":\"rust\"}"}
                    }]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8}
        })),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(completion("Rust is a language."))).await;
    let model = client(&server);
    let search = ToolSpec::new(
        "search",
        "Search the web",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    );

    let mut messages = vec![Message::user("What is Rust?")];
    let first = model
        .chat(ChatRequest::new(messages.clone()).with_tools(vec![search.clone()]))
        .await
        .unwrap();
    assert_eq!(first.finish_reason, Some(FinishReason::ToolCalls));
    let call = &first.message.tool_calls[0];
    assert_eq!(
        call,
        &ToolCall {
            id: "call_abc".into(),
            name: "search".into(),
            arguments: json!({"query": "rust"})
        }
    );

    messages.push(first.message.clone());
    messages.push(Message::tool_result(&call.id, "Rust: a systems language"));
    let second = model
        .chat(ChatRequest::new(messages).with_tools(vec![search]))
        .await
        .unwrap();
    assert_eq!(second.message.content, "Rust is a language.");

    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tools"],
        json!([{"type": "function", "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
        }}])
    );
    assert_eq!(
        sent[1]["messages"][1],
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_abc", "type": "function",
            "function": {"name": "search", "arguments": "{\"query\":\"rust\"}"}
        }]})
    );
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "Rust: a systems language"})
    );
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test-2025",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
    .to_string()
}

#[tokio::test]
async fn streaming_passes_each_delta_to_the_sink_in_order() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            (None, chunk(json!({"role": "assistant", "content": ""}), None)),
            (None, chunk(json!({"content": "Hel"}), None)),
            (None, chunk(json!({"content": "lo, "}), None)),
            (None, chunk(json!({"content": "world"}), None)),
            (None, chunk(json!({}), Some("stop"))),
            (
                None,
                json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
                    .to_string(),
            ),
            (None, "[DONE]".to_string()),
        ]),
    )
    .await;
    let (sink, seen) = recording_sink();

    let reply = client(&server)
        .chat(ask("Greet").with_stream(sink))
        .await
        .unwrap();

    assert_eq!(*seen.lock().unwrap(), ["Hel", "lo, ", "world"]);
    assert_eq!(reply.message.content, "Hello, world");
    assert_eq!(reply.usage, Usage::new(9, 4));
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    let body = &bodies(&server).await[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streaming_assembles_tool_call_fragments() {
    let server = MockServer::start().await;
    let call = |v: Value| chunk(json!({"tool_calls": [v]}), None);
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            (None, call(json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "search", "arguments": ""}}))),
            (None, call(json!({"index": 0, "function": {"arguments": "{\"que"}}))),
            (None, call(json!({"index": 0, "function": {"arguments": "ry\": \"tides\"}"}}))),
            (None, call(json!({"index": 1, "id": "call_2", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}))),
            (None, chunk(json!({}), Some("tool_calls"))),
            (None, "[DONE]".to_string()),
        ]),
    )
    .await;
    let (sink, seen) = recording_sink();

    let reply = client(&server)
        .chat(ask("Tides?").with_stream(sink))
        .await
        .unwrap();

    assert!(seen.lock().unwrap().is_empty(), "no text to stream");
    let calls = &reply.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "search");
    assert_eq!(calls[0].arguments, json!({"query": "tides"}));
    assert_eq!(calls[1].id, "call_2");
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn a_stream_cut_short_is_a_transient_error() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[(None, chunk(json!({"content": "Hel"}), None))]),
    )
    .await;
    let (sink, _) = recording_sink();

    let err = client(&server)
        .chat(ask("Greet").with_stream(sink))
        .await
        .unwrap_err();

    assert!(matches!(err, LlmError::Stream { .. }), "{err:?}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "1")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(completion("ok"))).await;

    let started = Instant::now();
    let reply = client(&server).chat(ask("hi")).await.unwrap();

    assert_eq!(reply.message.content, "ok");
    // The backoff alone is a few milliseconds: only Retry-After explains a second.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn a_retry_after_longer_than_allowed_fails_at_once() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        5,
        ResponseTemplate::new(429).insert_header("retry-after", "3600"),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    match &err {
        LlmError::Http(HttpError::RateLimited {
            retry_after,
            attempts,
            ..
        }) => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            assert_eq!(*attempts, 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.is_transient(), "the graph's retry policy may try later");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_server_error_is_retried() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(500).set_body_string("upstream hiccup"),
    )
    .await;
    answer_post(&server, ROUTE, 1, ResponseTemplate::new(503)).await;
    answer_post(&server, ROUTE, 1, json(completion("recovered"))).await;

    let reply = client(&server).chat(ask("hi")).await.unwrap();

    assert_eq!(reply.message.content, "recovered");
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn persistent_server_errors_fail_after_bounded_retries() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        100,
        ResponseTemplate::new(500).set_body_string("down"),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert_eq!(requests(&server).await.len(), 3, "1 attempt + 2 retries");
    assert!(err.is_transient());
    let text = err.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("3 attempt") && text.contains("down"),
        "{text}"
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        100,
        json(completion("too late")).set_delay(Duration::from_secs(3)),
    )
    .await;
    let mut http = fast_http();
    http.read_timeout = Duration::from_millis(100);
    http.retry.max_retries = 1;
    let model = OpenAiChat::new(
        OpenAiConfig::new("gpt-test")
            .with_base_url(format!("{}/v1", server.uri()))
            .with_http(http),
    )
    .unwrap();

    let started = Instant::now();
    let err = model.chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Http(HttpError::Timeout { attempts: 2, .. })),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_server_that_is_down_fails_at_once_naming_the_url() {
    let base = format!("{}/v1", dead_url());
    let started = std::time::Instant::now();
    let model = OpenAiChat::new(
        OpenAiConfig::new("gpt-test")
            .with_base_url(&base)
            .with_http(fast_http()),
    )
    .unwrap();

    let err = model.chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Http(HttpError::Refused { .. })),
        "{err:?}"
    );
    // Refused is not retried: nothing listens there.
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!err.should_retry());
    assert!(
        err.to_string()
            .contains(&format!("cannot reach the model at {base}")),
        "{err}"
    );
}

#[tokio::test]
async fn unauthorized_names_provider_url_and_model_but_never_the_key() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}."),
            "type": "invalid_request_error", "code": "invalid_api_key"
        }})),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    let text = err.to_string();
    assert!(text.contains("OpenAI-compatible API"), "{text}");
    assert!(text.contains(&format!("{}/v1", server.uri())), "{text}");
    assert!(text.contains("gpt-test"), "{text}");
    assert!(
        text.contains("OPENAI_API_KEY"),
        "says what to check: {text}"
    );
    assert!(!text.contains(KEY), "key leaked: {text}");
    assert!(!format!("{err:?}").contains(KEY), "key leaked in Debug");
    assert!(!err.is_transient());
    assert_eq!(
        requests(&server).await.len(),
        1,
        "auth failures are not retried"
    );
}

#[tokio::test]
async fn not_found_suggests_checking_base_url_and_model() {
    let server = MockServer::start().await;
    // Nothing mounted: wiremock answers 404.
    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert!(err.to_string().contains("/v1"));
    assert!(
        matches!(&err, LlmError::Http(e) if e.status() == Some(404)),
        "{err:?}"
    );
    assert!(err.to_string().contains("model `gpt-test`"), "{err}");
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        ResponseTemplate::new(200)
            .set_body_raw("{\"choices\": [ {\"message\": ", "application/json"),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert!(
        matches!(err, LlmError::Http(HttpError::InvalidBody { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("not the expected JSON"), "{err}");
}

#[tokio::test]
async fn json_of_the_wrong_shape_is_a_clear_error() {
    let server = MockServer::start().await;
    answer_post(&server, ROUTE, 1, json(json!({"choices": []}))).await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert!(err.to_string().contains("no choices"), "{err}");
}

#[tokio::test]
async fn an_error_object_in_a_200_body_is_reported() {
    // OpenRouter reports upstream failures this way.
    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(json!({"error": {"message": "Upstream overloaded", "code": 502}})),
    )
    .await;

    let err = client(&server).chat(ask("hi")).await.unwrap_err();

    assert!(err.to_string().contains("Upstream overloaded"));
    assert!(err.is_transient());
}

/// Runs against the real API when `OPENAI_API_KEY` is set:
/// `cargo test --test llm_openai -- --ignored`.
#[tokio::test]
#[ignore = "needs OPENAI_API_KEY and network"]
async fn real_openai_api() {
    if std::env::var("OPENAI_API_KEY")
        .map(|k| k.is_empty())
        .unwrap_or(true)
    {
        eprintln!("OPENAI_API_KEY is not set; skipping");
        return;
    }
    let model = OpenAiChat::new(OpenAiConfig::from_env(None).unwrap()).unwrap();
    let (sink, seen) = recording_sink();
    let reply = model
        .chat(ChatRequest::new(vec![Message::user("Say hello in three words.")]).with_stream(sink))
        .await
        .unwrap();
    assert!(!reply.message.content.is_empty());
    assert!(!seen.lock().unwrap().is_empty());
    assert!(reply.usage.output_tokens > 0);

    let (plan, _): (Plan, _) = structured(
        &model,
        vec![Message::user("A two-step plan to make tea.")],
        StructuredOptions::default(),
    )
    .await
    .unwrap();
    assert!(!plan.steps.is_empty());
}

/// A typed tool's derived schema goes out as the function's parameters; two calls in one reply
/// are run by a [`Toolbox`] (one of them failing) and both results go back in call order.
#[tokio::test]
async fn parallel_tool_calls_round_trip_through_a_toolbox_and_errors_become_results() {
    use stategraph_llm::ToolChoice;
    use stategraph_tools::{tool_fn, ToolFailure, Toolbox};

    #[derive(Deserialize, JsonSchema)]
    struct Weather {
        /// A city name.
        city: String,
    }
    let weather = tool_fn(
        "weather",
        "Current weather of a city",
        |a: Weather| async move {
            match a.city.as_str() {
                "Oslo" => Ok("cold".to_string()),
                other => Err(ToolFailure::new(format!("no station in {other}"))),
            }
        },
    );
    let tools = Toolbox::new(vec![weather]);

    let server = MockServer::start().await;
    answer_post(
        &server,
        ROUTE,
        1,
        json(json!({
            "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Atlantis\"}"}}
            ]}, "finish_reason": "tool_calls"}]
        })),
    )
    .await;
    answer_post(&server, ROUTE, 1, json(completion("Oslo is cold."))).await;
    let model = client(&server);

    let mut messages = vec![Message::user("Weather in Oslo and Atlantis?")];
    let request = |m: Vec<Message>| {
        ChatRequest::new(m)
            .with_tools(tools.specs())
            .with_tool_choice(ToolChoice::Required)
            .with_parallel_tool_calls(true)
    };
    let first = model.chat(request(messages.clone())).await.unwrap();
    let calls = first.message.tool_calls.clone();
    assert_eq!(
        calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    messages.push(first.message);
    for call in &calls {
        messages.push(tools.run(call).await.into_message());
    }
    let second = model
        .chat(request(messages).with_tool_choice(ToolChoice::Tool("weather".into())))
        .await
        .unwrap();
    assert_eq!(second.message.content, "Oslo is cold.");

    let sent = bodies(&server).await;
    let function = &sent[0]["tools"][0]["function"];
    assert_eq!(function["name"], "weather");
    assert_eq!(function["parameters"]["required"], json!(["city"]));
    assert_eq!(
        function["parameters"]["properties"]["city"]["description"],
        "A city name."
    );
    assert_eq!(sent[0]["tool_choice"], "required");
    assert_eq!(sent[0]["parallel_tool_calls"], true);
    assert_eq!(
        sent[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    let history = sent[1]["messages"].as_array().unwrap();
    assert_eq!(history[1]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        history[2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "cold"})
    );
    assert_eq!(
        history[3],
        json!({"role": "tool", "tool_call_id": "call_2", "content": "Error: no station in Atlantis"})
    );
}

/// Streamed deltas of two calls arrive interleaved (as servers that run calls in parallel send
/// them); each fragment goes to the call of its index.
#[tokio::test]
async fn streaming_interleaved_tool_call_deltas_are_assembled_by_index() {
    let server = MockServer::start().await;
    let call = |v: Value| chunk(json!({"tool_calls": [v]}), None);
    answer_post(
        &server,
        ROUTE,
        1,
        sse(&[
            (None, call(json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"pa"}}))),
            (None, call(json!({"index": 1, "id": "call_b", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\""}}))),
            (None, call(json!({"index": 0, "function": {"arguments": "th\": \"a.txt\"}"}}))),
            (None, call(json!({"index": 1, "function": {"arguments": ": \".\"}"}}))),
            (None, chunk(json!({}), Some("tool_calls"))),
            (None, "[DONE]".to_string()),
        ]),
    )
    .await;
    let (sink, _) = recording_sink();
    let reply = client(&server)
        .chat(ask("Look around").with_stream(sink))
        .await
        .unwrap();
    let calls = &reply.message.tool_calls;
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect::<Vec<_>>(),
        [
            ("call_a", "read_file", json!({"path": "a.txt"})),
            ("call_b", "list_dir", json!({"path": "."}))
        ]
    );
}
