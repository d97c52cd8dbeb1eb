//! Reading a reply answered in one body: the wire types of a completion (its usage and error
//! shared with the stream's chunks), tool calls with their arguments parsed, and the finish
//! reason.

use serde::Deserialize;
use serde_json::{json, Value};

use super::PROVIDER;
use crate::{ChatResponse, FinishReason, LlmError, Message, ToolCall, Usage};

#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        Usage::new(u.prompt_tokens, u.completion_tokens)
    }
}

#[derive(Deserialize)]
pub(super) struct WireError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

impl WireError {
    pub(super) fn into_error(self) -> LlmError {
        let kind = self
            .kind
            .clone()
            .or_else(|| self.code.as_ref().map(|c| c.to_string()))
            .unwrap_or_else(|| "error".to_string());
        let code = self.code.as_ref().and_then(Value::as_u64).unwrap_or(0);
        let transient = code == 408
            || code == 429
            || (500..600).contains(&code)
            || ["server_error", "rate_limit", "overloaded", "timeout"]
                .iter()
                .any(|k| kind.contains(k));
        LlmError::Provider {
            provider: PROVIDER.to_string(),
            kind,
            message: self.message,
            transient,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Completion {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl Completion {
    /// The reply; `requested_model` is named when the body names none.
    pub(super) fn into_response(self, requested_model: &str) -> Result<ChatResponse, LlmError> {
        if let Some(error) = self.error {
            return Err(error.into_error());
        }
        let Some(choice) = self.choices.into_iter().next() else {
            return Err(LlmError::MalformedResponse {
                provider: PROVIDER.to_string(),
                detail: "the response has no choices".to_string(),
            });
        };
        let mut content = content_text(choice.message.content);
        if content.is_empty() {
            content = choice.message.refusal.unwrap_or_default();
        }
        let tool_calls = choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: c.function.name,
                arguments: parse_arguments(c.function.arguments),
            })
            .collect();
        Ok(ChatResponse {
            message: Message::assistant_tool_calls(content, tool_calls),
            // A server that reports no tokens still answered one request.
            usage: self.usage.map(Usage::from).unwrap_or(Usage::new(0, 0)),
            model: self.model.unwrap_or_else(|| requested_model.to_string()),
            finish_reason: choice.finish_reason.as_deref().map(finish_reason),
        })
    }
}

/// A tool call's arguments as sent by the server; text that is not JSON is kept verbatim as
/// a `Value::String`.
pub(super) fn parse_arguments(raw: Option<Value>) -> Value {
    match raw {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(text)) if text.trim().is_empty() => json!({}),
        Some(Value::String(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        // Some servers (older Ollama) send the object itself.
        Some(other) => other,
    }
}

pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Message content is a string, or (for some servers) an array of `{type: text, text}` parts.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::arguments_text;
    use super::*;

    #[test]
    fn invalid_tool_arguments_are_kept_verbatim() {
        assert_eq!(parse_arguments(Some(json!("{\"q\": 1}"))), json!({"q": 1}));
        assert_eq!(parse_arguments(Some(json!("{oops"))), json!("{oops"));
        assert_eq!(parse_arguments(None), json!({}));
        assert_eq!(arguments_text(&json!("{oops")), "{oops");
    }
}
