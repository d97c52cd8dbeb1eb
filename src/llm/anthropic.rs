//! Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! System messages become the top-level `system` field, tool results become `tool_result`
//! blocks in a user turn, and a [`JsonSchemaFormat`](super::JsonSchemaFormat) is obtained by
//! forcing a call of a tool with that schema (`tool_choice: {type: tool, name}`): the tool's
//! input is returned as the reply's text, so [`structured`](fn@super::structured) works the
//! same on both providers.
//!
//! ```no_run
//! use stategraph::llm::anthropic::{AnthropicChat, AnthropicConfig};
//! # fn run() -> Result<(), stategraph::llm::LlmError> {
//! let model = AnthropicChat::new(AnthropicConfig::from_env(None)?)?;
//! # let _ = model; Ok(()) }
//! ```

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{decode_json, non_empty_env, Endpoint, HttpClient, HttpSettings, Secret};
use super::sse::{for_each_event, is_event_stream, Flow};
use super::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Message, Role, ToolCall,
    ToolChoice, Usage,
};

/// The Anthropic API, used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";
/// How this provider is named in errors.
pub const PROVIDER: &str = "Anthropic";

/// Settings of an [`AnthropicChat`].
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    /// Base URL without `/v1`, as in Anthropic's own SDKs.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<Secret>,
    /// The model name, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The output cap used when a request sets none (the API requires one).
    pub default_max_tokens: u32,
    /// Timeouts and retries.
    pub http: HttpSettings,
}

impl AnthropicConfig {
    /// The Anthropic API with this model and no key.
    pub fn new(model: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: None,
            model: model.into(),
            default_max_tokens: 4096,
            http: HttpSettings::default(),
        }
    }

    /// Reads `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL`, and the model from
    /// `model` or else `GRAPH_MODEL` (else [`DEFAULT_MODEL`]).
    pub fn from_env(model: Option<String>) -> Result<Self, LlmError> {
        AnthropicConfig::from_lookup(model, &non_empty_env)
    }

    pub(crate) fn from_lookup(
        model: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let key = env("ANTHROPIC_API_KEY").ok_or_else(|| {
            LlmError::NotConfigured(
                "the Anthropic provider needs ANTHROPIC_API_KEY to be set".to_string(),
            )
        })?;
        let model = model
            .or_else(|| env("GRAPH_MODEL"))
            .unwrap_or_else(|| DEFAULT_MODEL.to_string());
        Ok(AnthropicConfig {
            base_url: env("ANTHROPIC_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_string()),
            api_key: Some(Secret::new(key)),
            ..AnthropicConfig::new(model)
        })
    }

    /// Talks to another server (a proxy, a test server).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Secret::new(key));
        self
    }

    /// Sets timeouts and retries.
    pub fn with_http(mut self, http: HttpSettings) -> Self {
        self.http = http;
        self
    }
}

/// A [`ChatModel`] over the Anthropic Messages API.
#[derive(Clone, Debug)]
pub struct AnthropicChat {
    http: HttpClient,
    url: String,
    endpoint: Endpoint,
    model: String,
    auth: Option<HeaderValue>,
    key: Option<Secret>,
    default_max_tokens: u32,
}

impl AnthropicChat {
    /// Builds a client; fails on an invalid base URL or a key that cannot be sent.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/').to_string();
        reqwest::Url::parse(&base).map_err(|e| {
            LlmError::Config(format!(
                "Anthropic base URL `{base}` is not a valid URL: {e}"
            ))
        })?;
        let endpoint = Endpoint::new(PROVIDER, base.clone())
            .with_model(config.model.clone())
            .with_key_var("ANTHROPIC_API_KEY");
        let auth = match &config.api_key {
            Some(key) => Some(key.header_value("").ok_or_else(|| {
                LlmError::Config(
                    "the Anthropic API key contains characters that cannot be sent in a header"
                        .to_string(),
                )
            })?),
            None => None,
        };
        Ok(AnthropicChat {
            http: HttpClient::new(config.http, &endpoint)?,
            url: format!("{base}/v1/messages"),
            endpoint,
            model: config.model,
            auth,
            key: config.api_key,
            default_max_tokens: config.default_max_tokens,
        })
    }

    /// The configured model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The request body, exactly as sent.
    fn body(&self, request: &ChatRequest, model: &str, stream: bool) -> Value {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System && !m.content.is_empty())
            .map(|m| m.content.as_str())
            .collect();
        let mut body = json!({
            "model": model,
            "max_tokens": request.max_tokens.unwrap_or(self.default_max_tokens),
            "messages": wire_messages(&request.messages),
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        let mut tool_choice = request.tool_choice.as_ref().map(|choice| match choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        });
        if let Some(format) = &request.response_format {
            tools.push(json!({
                "name": format.name,
                "description": "Give your answer by calling this tool; its input is your answer \
                                and must match the schema.",
                "input_schema": format.schema,
            }));
            tool_choice = Some(json!({"type": "tool", "name": format.name}));
        }
        if request.parallel_tool_calls == Some(false) && !request.tools.is_empty() {
            let mut choice = tool_choice.unwrap_or_else(|| json!({"type": "auto"}));
            choice["disable_parallel_tool_use"] = json!(true);
            tool_choice = Some(choice);
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        if let Some(choice) = tool_choice {
            body["tool_choice"] = choice;
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }
}

/// Converts the conversation into Anthropic turns: system messages are left out (they go in
/// `system`), tool results become `tool_result` blocks of a user turn, and consecutive
/// turns of the same role are joined, because all results answering one assistant turn
/// must arrive in a single user turn.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages.iter().filter(|m| !m.remove) {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", text_block(&m.content)),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = text_block(&m.content);
                blocks.extend(m.tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(&c.arguments)})
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// Tool input must be an object; arguments kept as a raw string (invalid JSON from another
/// model) are wrapped rather than dropped.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        other => json!({"input": other}),
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

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached prompt tokens are prompt tokens too; count them as input.
    fn input(&self) -> Option<u64> {
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
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

impl WireError {
    fn into_error(self) -> LlmError {
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
struct WireMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

/// Builds the reply from content blocks; `format_tool` is the forced structured-output tool,
/// whose input becomes the reply's text.
fn assemble(
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

enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

fn block_from_wire(block: &Value) -> Option<Block> {
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(Block::Text(
            block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        )),
        "tool_use" => Some(Block::ToolUse {
            id: block
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: block
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            input: block.get("input").cloned().unwrap_or_else(|| json!({})),
        }),
        // Thinking and other block types carry nothing the caller asked for.
        _ => None,
    }
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

#[async_trait]
impl ChatModel for AnthropicChat {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.clone().unwrap_or_else(|| self.model.clone());
        let endpoint = self.endpoint.clone().with_model(model.clone());
        let sink = request.stream.clone();
        let format_tool = request.response_format.as_ref().map(|f| f.name.clone());
        let body = self.body(&request, &model, sink.is_some());
        let key = self.key.as_ref();
        let build = |client: &reqwest::Client| {
            let builder = client
                .post(&self.url)
                .header("anthropic-version", API_VERSION)
                .json(&body);
            match &self.auth {
                Some(auth) => builder.header("x-api-key", auth.clone()),
                None => builder,
            }
        };
        let non_streamed = |wire: WireMessage| -> Result<ChatResponse, LlmError> {
            if let Some(error) = wire.error {
                return Err(error.into_error());
            }
            let Some(content) = wire.content else {
                return Err(LlmError::MalformedResponse {
                    provider: PROVIDER.to_string(),
                    detail: "the response has no `content`".to_string(),
                });
            };
            let usage = wire.usage.unwrap_or_default();
            Ok(assemble(
                content.iter().filter_map(block_from_wire).collect(),
                format_tool.as_deref(),
                Usage::new(usage.input().unwrap_or(0), usage.output_tokens.unwrap_or(0)),
                wire.model.unwrap_or_else(|| model.clone()),
                wire.stop_reason,
            ))
        };
        let Some(sink) = sink else {
            let wire: WireMessage = self.http.send_json(&endpoint, key, build).await?;
            return non_streamed(wire);
        };

        let response = self.http.send(&endpoint, key, build).await?;
        if !is_event_stream(&response) {
            let bytes = response.bytes().await.map_err(|e| LlmError::Stream {
                provider: PROVIDER.to_string(),
                detail: e.to_string(),
            })?;
            let reply = non_streamed(decode_json(&endpoint, key, &bytes)?)?;
            if !reply.message.content.is_empty() {
                sink(&reply.message.content);
            }
            return Ok(reply);
        }

        let mut blocks: BTreeMap<usize, PartialBlock> = BTreeMap::new();
        let mut usage = WireUsage::default();
        let mut reply_model = None;
        let mut stop_reason = None;
        let finished = for_each_event(response, &endpoint, key, |event| {
            if event.data.trim().is_empty() {
                return Ok(Flow::Continue);
            }
            let event: StreamEvent = decode_json(&endpoint, key, event.data.as_bytes())?;
            match event.kind.as_str() {
                "message_start" => {
                    if let Some(message) = event.message {
                        reply_model = message.model;
                        if let Some(u) = message.usage {
                            usage = u;
                        }
                    }
                }
                "content_block_start" => {
                    let block = event.content_block.unwrap_or(Value::Null);
                    let partial = match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                            if !text.is_empty() {
                                sink(text);
                            }
                            PartialBlock::Text(text.to_string())
                        }
                        Some("tool_use") => PartialBlock::ToolUse {
                            id: block.get("id").and_then(Value::as_str).unwrap_or("").into(),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .into(),
                            json: String::new(),
                        },
                        _ => PartialBlock::Ignored,
                    };
                    blocks.insert(event.index.unwrap_or(blocks.len()), partial);
                }
                "content_block_delta" => {
                    let delta = event.delta.unwrap_or(Value::Null);
                    let index = event.index.unwrap_or(0);
                    match (
                        blocks.get_mut(&index),
                        delta.get("type").and_then(Value::as_str),
                    ) {
                        (Some(PartialBlock::Text(text)), Some("text_delta")) => {
                            if let Some(t) = delta.get("text").and_then(Value::as_str) {
                                sink(t);
                                text.push_str(t);
                            }
                        }
                        (
                            Some(PartialBlock::ToolUse { name, json, .. }),
                            Some("input_json_delta"),
                        ) => {
                            if let Some(part) = delta.get("partial_json").and_then(Value::as_str) {
                                // The forced structured-output tool's input *is* the answer
                                // text, so it streams like text does on OpenAI.
                                if Some(name.as_str()) == format_tool.as_deref() {
                                    sink(part);
                                }
                                json.push_str(part);
                            }
                        }
                        _ => {}
                    }
                }
                "message_delta" => {
                    if let Some(reason) = event
                        .delta
                        .as_ref()
                        .and_then(|d| d.get("stop_reason"))
                        .and_then(Value::as_str)
                    {
                        stop_reason = Some(reason.to_string());
                    }
                    // message_delta usage is cumulative; it may restate input tokens.
                    if let Some(u) = event.usage {
                        if u.output_tokens.is_some() {
                            usage.output_tokens = u.output_tokens;
                        }
                        if u.input().is_some() && u.input() >= usage.input() {
                            usage.input_tokens = u.input_tokens;
                            usage.cache_creation_input_tokens = u.cache_creation_input_tokens;
                            usage.cache_read_input_tokens = u.cache_read_input_tokens;
                        }
                    }
                }
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
        })
        .await?;
        if !finished && stop_reason.is_none() {
            return Err(LlmError::Stream {
                provider: PROVIDER.to_string(),
                detail: "the stream ended before message_stop".to_string(),
            });
        }
        let blocks = blocks
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
        Ok(assemble(
            blocks,
            format_tool.as_deref(),
            Usage::new(usage.input().unwrap_or(0), usage.output_tokens.unwrap_or(0)),
            reply_model.unwrap_or_else(|| model.clone()),
            stop_reason,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_share_one_user_turn_and_system_is_lifted() {
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Weather in Oslo and Rome?"),
            Message::assistant_tool_calls(
                "",
                vec![
                    ToolCall {
                        id: "a".into(),
                        name: "weather".into(),
                        arguments: json!({"city": "Oslo"}),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "weather".into(),
                        arguments: json!({"city": "Rome"}),
                    },
                ],
            ),
            Message::tool_result("a", "cold"),
            Message::tool_result("b", "warm"),
        ];
        let wire = wire_messages(&messages);
        assert_eq!(wire.len(), 3);
        assert_eq!(wire[1]["content"][0]["type"], "tool_use");
        assert_eq!(wire[2]["role"], "user");
        assert_eq!(wire[2]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(wire[2]["content"][1]["tool_use_id"], "b");
    }

    #[test]
    fn missing_key_is_not_configured() {
        let err = AnthropicConfig::from_lookup(None, &|_: &str| None).unwrap_err();
        assert!(matches!(err, LlmError::NotConfigured(_)));
    }
}
