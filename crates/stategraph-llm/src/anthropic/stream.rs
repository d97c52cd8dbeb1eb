//! A streamed reply: Anthropic's server-sent events (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `error`) folded into content blocks, with text (and the
//! structured-output tool's input) passed to the token sink as it arrives.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use super::reply::{assemble, Block, WireError, WireMessage, WireUsage};
use super::PROVIDER;
use crate::http::{decode_json, Endpoint, Secret};
use crate::sse::{for_each_event, Flow};
use crate::{ChatResponse, LlmError, TokenSink};

#[derive(Deserialize)]
struct StreamEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

/// A content block being assembled from stream events.
enum PartialBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Ignored,
}

/// The reply so far.
struct Streamed<'a> {
    sink: &'a TokenSink,
    format_tool: Option<&'a str>,
    blocks: BTreeMap<usize, PartialBlock>,
    usage: WireUsage,
    model: Option<String>,
    stop_reason: Option<String>,
}

/// Reads the event stream of `response` into a reply, passing text to `sink` as it comes.
/// `format_tool` is the forced structured-output tool; `model` is named when the stream
/// names none.
pub(super) async fn read(
    response: reqwest::Response,
    endpoint: &Endpoint,
    key: Option<&Secret>,
    sink: &TokenSink,
    format_tool: Option<&str>,
    model: &str,
) -> Result<ChatResponse, LlmError> {
    let mut reply = Streamed {
        sink,
        format_tool,
        blocks: BTreeMap::new(),
        usage: WireUsage::default(),
        model: None,
        stop_reason: None,
    };
    let finished = for_each_event(response, endpoint, key, |event| {
        if event.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        reply.on_event(decode_json(endpoint, key, event.data.as_bytes())?)
    })
    .await?;
    if !finished && reply.stop_reason.is_none() {
        return Err(LlmError::Stream {
            provider: PROVIDER.to_string(),
            detail: "the stream ended before message_stop".to_string(),
        });
    }
    Ok(reply.finish(model))
}

impl Streamed<'_> {
    fn on_event(&mut self, event: StreamEvent) -> Result<Flow, LlmError> {
        match event.kind.as_str() {
            "message_start" => {
                if let Some(message) = event.message {
                    self.model = message.model;
                    if let Some(u) = message.usage {
                        self.usage = u;
                    }
                }
            }
            "content_block_start" => {
                let partial = self.start_block(event.content_block.unwrap_or(Value::Null));
                let index = event.index.unwrap_or(self.blocks.len());
                self.blocks.insert(index, partial);
            }
            "content_block_delta" => {
                self.add_delta(event.index.unwrap_or(0), event.delta.unwrap_or(Value::Null))
            }
            "message_delta" => self.message_delta(event.delta.as_ref(), event.usage),
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                let error = event.error.unwrap_or(WireError {
                    kind: "error".to_string(),
                    message: "unspecified error in stream".to_string(),
                });
                return Err(error.into_error());
            }
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn start_block(&self, block: Value) -> PartialBlock {
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = field("text");
                if !text.is_empty() {
                    (self.sink)(text);
                }
                PartialBlock::Text(text.to_string())
            }
            Some("tool_use") => PartialBlock::ToolUse {
                id: field("id").into(),
                name: field("name").into(),
                json: String::new(),
            },
            _ => PartialBlock::Ignored,
        }
    }

    fn add_delta(&mut self, index: usize, delta: Value) {
        let kind = delta.get("type").and_then(Value::as_str);
        match (self.blocks.get_mut(&index), kind) {
            (Some(PartialBlock::Text(text)), Some("text_delta")) => {
                if let Some(t) = delta.get("text").and_then(Value::as_str) {
                    (self.sink)(t);
                    text.push_str(t);
                }
            }
            (Some(PartialBlock::ToolUse { name, json, .. }), Some("input_json_delta")) => {
                if let Some(part) = delta.get("partial_json").and_then(Value::as_str) {
                    // The forced structured-output tool's input *is* the answer text, so it
                    // streams like text does on OpenAI.
                    if Some(name.as_str()) == self.format_tool {
                        (self.sink)(part);
                    }
                    json.push_str(part);
                }
            }
            _ => {}
        }
    }

    fn message_delta(&mut self, delta: Option<&Value>, usage: Option<WireUsage>) {
        if let Some(reason) = delta
            .and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str)
        {
            self.stop_reason = Some(reason.to_string());
        }
        // message_delta usage is cumulative; it may restate input tokens.
        if let Some(u) = usage {
            if u.output_tokens.is_some() {
                self.usage.output_tokens = u.output_tokens;
            }
            if u.input().is_some() && u.input() >= self.usage.input() {
                self.usage.input_tokens = u.input_tokens;
                self.usage.cache_creation_input_tokens = u.cache_creation_input_tokens;
                self.usage.cache_read_input_tokens = u.cache_read_input_tokens;
            }
        }
    }

    fn finish(self, model: &str) -> ChatResponse {
        let blocks = self
            .blocks
            .into_values()
            .filter_map(|b| match b {
                PartialBlock::Text(t) => Some(Block::Text(t)),
                PartialBlock::ToolUse { id, name, json } => Some(Block::ToolUse {
                    id,
                    name,
                    input: if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json).unwrap_or(Value::String(json))
                    },
                }),
                PartialBlock::Ignored => None,
            })
            .collect();
        assemble(
            blocks,
            self.format_tool,
            self.usage.to_usage(),
            self.model.unwrap_or_else(|| model.to_string()),
            self.stop_reason,
        )
    }
}
