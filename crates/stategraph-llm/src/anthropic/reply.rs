//! Reading a reply: the wire types of a Messages response (shared with the stream's events),
//! content blocks, and the [`ChatResponse`] assembled from them, where the forced
//! structured-output tool's input becomes the reply's text.

use serde::Deserialize;
use serde_json::{json, Value};

use super::PROVIDER;
use crate::{ChatResponse, FinishReason, LlmError, Message, ToolCall, Usage};

#[derive(Deserialize, Default, Clone, Copy)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached prompt tokens are prompt tokens too; count them as input.
    pub(super) fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        if parts.iter().all(Option::is_none) {
            None
        } else {
            Some(parts.iter().map(|p| p.unwrap_or(0)).sum())
        }
    }

    pub(super) fn to_usage(self) -> Usage {
        Usage::new(self.input().unwrap_or(0), self.output_tokens.unwrap_or(0))
    }
}

#[derive(Deserialize)]
pub(super) struct WireError {
    #[serde(rename = "type", default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
}

impl WireError {
    pub(super) fn into_error(self) -> LlmError {
        let transient = matches!(
            self.kind.as_str(),
            "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
        );
        LlmError::Provider {
            provider: PROVIDER.to_string(),
            kind: self.kind,
            message: self.message,
            transient,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct WireMessage {
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

impl WireMessage {
    /// The reply of a request answered in one body (not streamed). `format_tool` is the
    /// forced structured-output tool; `model` is named when the body names none.
    pub(super) fn into_response(
        self,
        format_tool: Option<&str>,
        model: &str,
    ) -> Result<ChatResponse, LlmError> {
        if let Some(error) = self.error {
            return Err(error.into_error());
        }
        let Some(content) = self.content else {
            return Err(LlmError::MalformedResponse {
                provider: PROVIDER.to_string(),
                detail: "the response has no `content`".to_string(),
            });
        };
        Ok(assemble(
            content.iter().filter_map(block_from_wire).collect(),
            format_tool,
            self.usage.unwrap_or_default().to_usage(),
            self.model.unwrap_or_else(|| model.to_string()),
            self.stop_reason,
        ))
    }
}

/// A content block of a reply, as far as the caller cares.
pub(super) enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

fn block_from_wire(block: &Value) -> Option<Block> {
    let text = |field: &str| {
        block
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(Block::Text(text("text"))),
        "tool_use" => Some(Block::ToolUse {
            id: text("id"),
            name: text("name"),
            input: block.get("input").cloned().unwrap_or_else(|| json!({})),
        }),
        // Thinking and other block types carry nothing the caller asked for.
        _ => None,
    }
}

/// Builds the reply from content blocks; `format_tool` is the forced structured-output tool,
/// whose input becomes the reply's text.
pub(super) fn assemble(
    blocks: Vec<Block>,
    format_tool: Option<&str>,
    usage: Usage,
    model: String,
    stop_reason: Option<String>,
) -> ChatResponse {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut structured = None;
    for block in blocks {
        match block {
            Block::Text(t) => text.push_str(&t),
            Block::ToolUse { id, name, input } => {
                if Some(name.as_str()) == format_tool && structured.is_none() {
                    structured = Some(input);
                } else {
                    calls.push(ToolCall {
                        id,
                        name,
                        arguments: input,
                    });
                }
            }
        }
    }
    let mut finish = stop_reason.as_deref().map(finish_reason);
    if let Some(input) = structured {
        // The forced tool call is how the answer arrives, not a tool the caller must run.
        text = match input {
            Value::String(raw) => raw,
            other => other.to_string(),
        };
        if calls.is_empty() && finish == Some(FinishReason::ToolCalls) {
            finish = Some(FinishReason::Stop);
        }
    }
    ChatResponse {
        message: Message::assistant_tool_calls(text, calls),
        usage,
        model,
        finish_reason: finish,
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}
