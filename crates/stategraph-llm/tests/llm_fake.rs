//! The fake model as a user's test would use it, with usage accounting and provider
//! selection through the public API.

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use stategraph_llm::provider::{build, detect, ProviderKind, ProviderSettings};
use stategraph_llm::{
    structured, ChatModel, ChatRequest, FakeChatModel, LlmError, Message, Pricing, Role,
    StructuredOptions, TokenSink, Usage, UsageLedger,
};

#[derive(Debug, Deserialize, JsonSchema)]
struct Outline {
    sections: Vec<String>,
}

#[tokio::test]
async fn a_scripted_agent_turn_with_a_tool_call_and_a_transient_failure() {
    let model = FakeChatModel::new()
        .then_tool_call("search", json!({"query": "tides"}))
        .then_error(LlmError::Stream {
            provider: "fake".into(),
            detail: "connection reset".into(),
        })
        .then_text("Tides come from the moon.");
    let mut ledger = UsageLedger::new();
    let price = Pricing {
        input_per_million: 1.0,
        output_per_million: 2.0,
    };

    let mut messages = vec![Message::user("Why are there tides?")];
    let first = model
        .chat(ChatRequest::new(messages.clone()))
        .await
        .unwrap();
    ledger.record("agent", first.usage, Some(&price));
    let call = first.message.tool_calls[0].clone();
    messages.push(first.message);
    messages.push(Message::tool_result(&call.id, "the moon's gravity"));

    // The engine's retry policy asks the error whether to try again.
    let err = model
        .chat(ChatRequest::new(messages.clone()))
        .await
        .unwrap_err();
    assert!(err.is_transient());
    let answer = model.chat(ChatRequest::new(messages)).await.unwrap();
    ledger.record("agent", answer.usage, Some(&price));

    assert_eq!(answer.message.content, "Tides come from the moon.");
    assert_eq!(model.call_count(), 3);
    assert_eq!(model.remaining(), 0);
    let last_request = model.requests().pop().unwrap();
    assert_eq!(last_request.messages[2].role, Role::Tool);
    let agent = ledger.node("agent").unwrap();
    assert_eq!(agent.calls, 2);
    assert!(agent.cost.unwrap() > 0.0);
    // An empty script is an error, not a hang or a panic.
    assert!(matches!(
        model.chat(ChatRequest::default()).await,
        Err(LlmError::Fake(_))
    ));
}

#[tokio::test]
async fn replies_chosen_by_a_function_can_drive_structured_output() {
    let model = FakeChatModel::from_fn(|request| {
        let format = request.response_format.as_ref().expect("structured call");
        assert_eq!(format.name, "Outline");
        Ok(FakeChatModel::text_reply(
            r#"{"sections": ["intro", "tides"]}"#,
        ))
    });

    let (outline, usage): (Outline, Usage) = structured(
        &model,
        vec![Message::user("Outline a note on tides")],
        StructuredOptions::default(),
    )
    .await
    .unwrap();

    assert_eq!(outline.sections, ["intro", "tides"]);
    assert_eq!(usage.input_tokens, 5, "one token per word");
}

#[tokio::test]
async fn the_fake_streams_its_reply_through_the_sink() {
    let model = FakeChatModel::with_replies(["one two three"]);
    let seen = Arc::new(Mutex::new(String::new()));
    let record = Arc::clone(&seen);
    let sink: TokenSink = Arc::new(move |delta: &str| record.lock().unwrap().push_str(delta));

    model
        .chat(ChatRequest::new(vec![Message::user("count")]).with_stream(sink))
        .await
        .unwrap();

    assert_eq!(*seen.lock().unwrap(), "one two three");
}

#[test]
fn ledgers_from_parallel_branches_merge_and_serialise() {
    let mut left = UsageLedger::new();
    left.record("search", Usage::new(100, 10), None);
    let mut right = UsageLedger::new();
    right.record("search", Usage::new(50, 5), None);
    right.record("write", Usage::new(10, 90), None);

    let merged = UsageLedger::new().merged(&left).merged(&right);

    assert_eq!(
        merged.node("search").unwrap().usage,
        Usage::new(150, 15).tokens()
    );
    assert_eq!(merged.total().usage, Usage::new(160, 105).tokens());
    assert_eq!(merged.total().calls, 3);
    let stored = serde_json::to_value(&merged).unwrap();
    let back: UsageLedger = serde_json::from_value(stored).unwrap();
    assert_eq!(back, merged);
}

#[test]
fn the_provider_is_picked_from_the_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |var: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.to_string())
        }
    };
    let settings = ProviderSettings::default();
    assert_eq!(
        detect(&settings, &env(&[("ANTHROPIC_API_KEY", "k")])).unwrap(),
        ProviderKind::Anthropic
    );
    assert_eq!(
        detect(
            &settings,
            &env(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")])
        )
        .unwrap(),
        ProviderKind::OpenAi
    );
    let local = build(
        settings.clone(),
        &env(&[
            ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
            ("GRAPH_MODEL", "llama3.2"),
        ]),
    );
    assert!(local.is_ok());
    let err = build(settings, &env(&[])).err().unwrap();
    assert!(matches!(err, LlmError::NotConfigured(_)));
    assert!(err
        .to_string()
        .contains("OPENAI_BASE_URL=http://localhost:11434/v1"));
}
