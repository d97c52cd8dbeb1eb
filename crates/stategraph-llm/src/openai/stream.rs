//! A streamed reply: Chat Completions chunks (`data: {...}` up to `data: [DONE]`) folded into
//! one reply, text passed to the token sink as it arrives, tool calls joined from their
//! fragments.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::reply::{finish_reason, parse_arguments, WireError, WireUsage};
use super::PROVIDER;
use crate::http::{decode_json, Endpoint, Secret};
use crate::sse::{for_each_event, Flow};
use crate::{ChatResponse, LlmError, Message, TokenSink, ToolCall, Usage};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Reads the event stream of `response` into a reply, passing text to `sink` as it comes;
/// `model` is named when no chunk names one.
pub(super) async fn read(
    response: reqwest::Response,
    endpoint: &Endpoint,
    key: Option<&Secret>,
    sink: &TokenSink,
    model: &str,
) -> Result<ChatResponse, LlmError> {
    let mut assembly = Assembly::default();
    let finished = for_each_event(response, endpoint, key, |event| {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        assembly.add_chunk(decode_json(endpoint, key, data.as_bytes())?, sink)?;
        Ok(Flow::Continue)
    })
    .await?;
    if !finished && assembly.finish.is_none() {
        return Err(LlmError::Stream {
            provider: PROVIDER.to_string(),
            detail: "the stream ended before the reply was complete".to_string(),
        });
    }
    Ok(assembly.into_response(model))
}

/// A reply being assembled from stream chunks.
#[derive(Default)]
struct Assembly {
    text: String,
    refusal: String,
    /// Tool calls by their stream index; the first chunk of a call carries id and name, the
    /// rest carry argument fragments.
    calls: BTreeMap<usize, (String, String, String)>,
    last_index: Option<usize>,
    model: Option<String>,
    usage: Option<Usage>,
    finish: Option<String>,
}

impl Assembly {
    fn add_chunk(&mut self, chunk: Chunk, sink: &TokenSink) -> Result<(), LlmError> {
        if let Some(error) = chunk.error {
            return Err(error.into_error());
        }
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices {
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                sink(&text);
                self.text.push_str(&text);
            }
            if let Some(refusal) = delta.refusal {
                self.refusal.push_str(&refusal);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.add_call_delta(call);
            }
        }
        Ok(())
    }

    fn add_call_delta(&mut self, delta: DeltaToolCall) {
        let index = match delta.index {
            Some(i) => i,
            // Without an index, a new id starts a new call; otherwise it continues the last.
            None => match (&delta.id, self.last_index) {
                (None, Some(last)) => last,
                _ => self.calls.len(),
            },
        };
        self.last_index = Some(index);
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            entry.0 = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name {
                entry.1.push_str(&name);
            }
            match function.arguments {
                Some(Value::String(fragment)) => entry.2.push_str(&fragment),
                Some(Value::Null) | None => {}
                Some(object) => entry.2 = object.to_string(),
            }
        }
    }

    fn into_response(self, requested_model: &str) -> ChatResponse {
        let calls = self
            .calls
            .into_iter()
            .map(|(i, (id, name, args))| ToolCall {
                id: if id.is_empty() {
                    format!("call_{i}")
                } else {
                    id
                },
                name,
                arguments: parse_arguments(Some(Value::String(args))),
            })
            .collect();
        let content = if self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        ChatResponse {
            message: Message::assistant_tool_calls(content, calls),
            // A server that reports no tokens still answered one request.
            usage: self.usage.unwrap_or(Usage::new(0, 0)),
            model: self.model.unwrap_or_else(|| requested_model.to_string()),
            finish_reason: self.finish.as_deref().map(finish_reason),
        }
    }
}
