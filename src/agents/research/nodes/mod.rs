//! The research graph's nodes, one file each, plus what they share.

pub(crate) mod escalate;
pub(crate) mod escalate_tool;
pub(crate) mod execute;
pub(crate) mod execution_router;
pub(crate) mod finalize;
pub(crate) mod generate_plan;
pub(crate) mod planning_mode;
pub(crate) mod reflect;
pub(crate) mod settle;
pub(crate) mod tool_loop;

use super::settings::ResearchSettings;
use crate::llm::{
    ChatModel, ChatRequest, LlmError, Message, StructuredOptions, Usage, UsageLedger,
};
use crate::runtime::{Context, NodeError};

/// The run's research settings, or a clear error.
pub(crate) fn settings(ctx: &Context) -> Result<ResearchSettings, NodeError> {
    ResearchSettings::from_map(ctx.settings()).map_err(|e| NodeError::new(e.to_string()))
}

/// The system message: the settings' override, else the built-in prompt.
pub(crate) fn system(custom: &Option<String>, builtin: &str) -> Message {
    Message::system(custom.clone().unwrap_or_else(|| builtin.to_string()))
}

/// A ledger holding one node's calls (the state's reducer adds it to the run's).
pub(crate) fn ledger(
    ctx: &Context,
    key: &str,
    node: &str,
    usage: Usage,
    settings: &ResearchSettings,
) -> UsageLedger {
    let mut ledger = UsageLedger::default();
    if ctx.was_replayed(key) {
        ledger.record_reused(node, usage, settings.pricing.as_ref());
    } else {
        ledger.record(node, usage, settings.pricing.as_ref());
    }
    ledger
}

/// Structured-output options with the settings' temperature.
pub(crate) fn options(name: &str, settings: &ResearchSettings) -> StructuredOptions {
    let mut opts = StructuredOptions::default().with_name(name);
    opts.temperature = settings.temperature;
    opts
}

/// A model error as a node error: retryable only when no layer below retried it (the node's
/// retry policy must not multiply the HTTP client's); a reply that did not fit says what was
/// asked for, a model that could not be reached says only that.
pub(crate) fn model_error(what: &str, e: LlmError) -> NodeError {
    let message = match e.is_about_the_reply() {
        true => format!("{what}: {e}"),
        false => e.to_string(),
    };
    if e.should_retry() {
        NodeError::transient(message)
    } else {
        NodeError::new(message)
    }
}

/// One plain-text model call, returning the reply's text and usage.
/// Asks the model for text once per task: the call is journaled under `key` (a node re-run after
/// a crash gets the recorded reply instead of paying again) and streamed as token events.
/// Returns the reply and the ledger entry for `node`.
pub(crate) async fn journaled_text(
    ctx: &Context,
    agent: &super::ResearchAgent,
    (key, node): (&str, &str),
    messages: Vec<Message>,
    settings: &ResearchSettings,
    failure: &'static str,
) -> Result<(String, UsageLedger), NodeError> {
    let model = agent.model().clone();
    let call_settings = settings.clone();
    let tokens = ctx.text_sink(crate::runtime::TOKEN_EVENT);
    let (text, usage): (String, Usage) = ctx
        .record(key, || async move {
            chat_text(model.as_ref(), messages, &call_settings, tokens)
                .await
                .map_err(|e| model_error(failure, e))
        })
        .await?;
    Ok((text, ledger(ctx, key, node, usage, settings)))
}

pub(crate) async fn chat_text(
    model: &dyn ChatModel,
    messages: Vec<Message>,
    settings: &ResearchSettings,
    stream: Option<crate::llm::TokenSink>,
) -> Result<(String, Usage), LlmError> {
    let mut request = ChatRequest::new(messages);
    request.temperature = settings.temperature;
    // Streamed replies show up as the run's token events (the CLI prints them as they arrive).
    request.stream = stream;
    let reply = model.chat(request).await?;
    Ok((reply.message.content, reply.usage))
}
