//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`).
//!
//! One client covers OpenAI, Ollama (`http://localhost:11434/v1`), vLLM, llama.cpp's server
//! (`http://localhost:8080/v1`), LM Studio and OpenRouter: they all speak this wire format.
//!
//! ```no_run
//! use stategraph::llm::openai::{OpenAiChat, OpenAiConfig};
//! use stategraph::llm::{ChatModel, ChatRequest, Message};
//! # async fn run() -> Result<(), stategraph::llm::LlmError> {
//! // A local Ollama needs no key.
//! let model = OpenAiChat::new(
//!     OpenAiConfig::new("llama3.2").with_base_url("http://localhost:11434/v1"),
//! )?;
//! let reply = model.chat(ChatRequest::new(vec![Message::user("Hello")])).await?;
//! # let _ = reply; Ok(()) }
//! ```

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{decode_json, non_empty_env, Endpoint, HttpClient, HttpSettings, Secret};
use super::sse::{for_each_event, is_event_stream, Flow};
use super::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Message, Role, ToolCall,
    ToolChoice, Usage,
};

/// The OpenAI API, used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used against the OpenAI API when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// How this provider is named in errors.
pub const PROVIDER: &str = "OpenAI-compatible API";

/// Settings of an [`OpenAiChat`].
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// Base URL up to and including `/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; optional for local servers.
    pub api_key: Option<Secret>,
    /// The model name, e.g. `gpt-4o-mini` or `llama3.2`.
    pub model: String,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// The body field for the output cap: `max_tokens` (understood by every compatible
    /// server) or `max_completion_tokens` (required by OpenAI's reasoning models).
    pub max_tokens_field: String,
}

impl OpenAiConfig {
    /// The OpenAI API with this model and no key.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: None,
            model: model.into(),
            http: HttpSettings::default(),
            max_tokens_field: "max_tokens".to_string(),
        }
    }

    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY`, and the model from `model` or else
    /// `GRAPH_MODEL` (else [`DEFAULT_MODEL`] when talking to OpenAI itself).
    pub fn from_env(model: Option<String>) -> Result<Self, LlmError> {
        OpenAiConfig::from_lookup(model, &non_empty_env)
    }

    pub(crate) fn from_lookup(
        model: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let base_url = env("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let model = match model.or_else(|| env("GRAPH_MODEL")) {
            Some(model) => model,
            None if trim_base(&base_url) == DEFAULT_BASE_URL => DEFAULT_MODEL.to_string(),
            None => {
                return Err(LlmError::NotConfigured(format!(
                    "OPENAI_BASE_URL is {base_url} but no model is set: set GRAPH_MODEL to a \
                     model that server serves (e.g. GRAPH_MODEL=llama3.2 for Ollama)"
                )))
            }
        };
        Ok(OpenAiConfig {
            base_url,
            api_key: env("OPENAI_API_KEY").map(Secret::new),
            ..OpenAiConfig::new(model)
        })
    }

    /// Talks to another server, e.g. `http://localhost:11434/v1`.
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

fn trim_base(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

/// A [`ChatModel`] over an OpenAI-compatible Chat Completions endpoint.
#[derive(Clone, Debug)]
pub struct OpenAiChat {
    http: HttpClient,
    url: String,
    endpoint: Endpoint,
    model: String,
    auth: Option<HeaderValue>,
    key: Option<Secret>,
    max_tokens_field: String,
}

impl OpenAiChat {
    /// Builds a client; fails on an invalid base URL or a key that cannot be sent.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let base = trim_base(&config.base_url).to_string();
        reqwest::Url::parse(&base).map_err(|e| {
            LlmError::Config(format!("OpenAI base URL `{base}` is not a valid URL: {e}"))
        })?;
        let endpoint = Endpoint::new(PROVIDER, base.clone())
            .with_model(config.model.clone())
            .with_key_var("OPENAI_API_KEY");
        let auth = match &config.api_key {
            Some(key) => Some(key.header_value("Bearer ").ok_or_else(|| {
                LlmError::Config(
                    "the OpenAI API key contains characters that cannot be sent in a header"
                        .to_string(),
                )
            })?),
            None => None,
        };
        Ok(OpenAiChat {
            http: HttpClient::new(config.http, &endpoint)?,
            url: format!("{base}/chat/completions"),
            endpoint,
            model: config.model,
            auth,
            key: config.api_key,
            max_tokens_field: config.max_tokens_field,
        })
    }

    /// The configured model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The request body, exactly as sent.
    fn body(&self, request: &ChatRequest, model: &str, stream: bool) -> Value {
        let mut body = json!({
            "model": model,
            "messages": request.messages.iter().filter(|m| !m.remove).map(wire_message).collect::<Vec<_>>(),
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        if let Some(choice) = &request.tool_choice {
            body["tool_choice"] = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
        }
        if let (Some(parallel), false) = (request.parallel_tool_calls, request.tools.is_empty()) {
            body["parallel_tool_calls"] = json!(parallel);
        }
        if let Some(format) = &request.response_format {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": format.name, "schema": format.schema, "strict": format.strict},
            });
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(max) = request.max_tokens {
            body[self.max_tokens_field.as_str()] = json!(max);
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }
}

fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        }),
        Role::Assistant if !m.tool_calls.is_empty() => json!({
            "role": "assistant",
            // OpenAI wants null, not "", next to tool calls.
            "content": if m.content.is_empty() { Value::Null } else { json!(m.content) },
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
            })).collect::<Vec<_>>(),
        }),
        role => json!({"role": role_name(role), "content": m.content}),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Arguments go over the wire as a JSON string. A `Value::String` holds arguments the model
/// produced that were not valid JSON; they are sent back verbatim.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

fn parse_arguments(raw: Option<Value>) -> Value {
    match raw {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(text)) if text.trim().is_empty() => json!({}),
        Some(Value::String(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        // Some servers (older Ollama) send the object itself.
        Some(other) => other,
    }
}

fn finish_reason(reason: &str) -> FinishReason {
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

#[derive(Deserialize)]
struct WireUsage {
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
struct WireError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

impl WireError {
    fn into_error(self) -> LlmError {
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
struct Completion {
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
    fn into_response(self, requested_model: &str) -> Result<ChatResponse, LlmError> {
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

#[async_trait]
impl ChatModel for OpenAiChat {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.clone().unwrap_or_else(|| self.model.clone());
        let endpoint = self.endpoint.clone().with_model(model.clone());
        let sink = request.stream.clone();
        let body = self.body(&request, &model, sink.is_some());
        let key = self.key.as_ref();
        let build = |client: &reqwest::Client| {
            let builder = client.post(&self.url).json(&body);
            match &self.auth {
                Some(auth) => builder.header(AUTHORIZATION, auth.clone()),
                None => builder,
            }
        };
        let Some(sink) = sink else {
            let completion: Completion = self.http.send_json(&endpoint, key, build).await?;
            return completion.into_response(&model);
        };

        let response = self.http.send(&endpoint, key, build).await?;
        if !is_event_stream(&response) {
            let bytes = response.bytes().await.map_err(|e| LlmError::Stream {
                provider: PROVIDER.to_string(),
                detail: e.to_string(),
            })?;
            let completion: Completion = decode_json(&endpoint, key, &bytes)?;
            let reply = completion.into_response(&model)?;
            if !reply.message.content.is_empty() {
                sink(&reply.message.content);
            }
            return Ok(reply);
        }

        let mut assembly = Assembly::default();
        let finished = for_each_event(response, &endpoint, key, |event| {
            let data = event.data.trim();
            if data == "[DONE]" {
                return Ok(Flow::Done);
            }
            if data.is_empty() {
                return Ok(Flow::Continue);
            }
            let chunk: Chunk = decode_json(&endpoint, key, data.as_bytes())?;
            if let Some(error) = chunk.error {
                return Err(error.into_error());
            }
            if chunk.model.is_some() {
                assembly.model = chunk.model;
            }
            if let Some(usage) = chunk.usage {
                assembly.usage = Some(usage.into());
            }
            for choice in chunk.choices {
                if let Some(reason) = choice.finish_reason {
                    assembly.finish = Some(reason);
                }
                let Some(delta) = choice.delta else { continue };
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    sink(&text);
                    assembly.text.push_str(&text);
                }
                if let Some(refusal) = delta.refusal {
                    assembly.refusal.push_str(&refusal);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    assembly.add_call_delta(call);
                }
            }
            Ok(Flow::Continue)
        })
        .await?;
        if !finished && assembly.finish.is_none() {
            return Err(LlmError::Stream {
                provider: PROVIDER.to_string(),
                detail: "the stream ended before the reply was complete".to_string(),
            });
        }
        Ok(assembly.into_response(&model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn config_defaults_to_openai_and_needs_a_model_for_other_servers() {
        let config = OpenAiConfig::from_lookup(None, &env(&[])).unwrap();
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.model, DEFAULT_MODEL);
        let err = OpenAiConfig::from_lookup(
            None,
            &env(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("GRAPH_MODEL"), "{err}");
        let config = OpenAiConfig::from_lookup(
            None,
            &env(&[
                ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
                ("GRAPH_MODEL", "llama3.2"),
                ("OPENAI_API_KEY", "sk-hidden"),
            ]),
        )
        .unwrap();
        assert_eq!(config.model, "llama3.2");
        assert!(!format!("{config:?}").contains("sk-hidden"));
    }

    #[test]
    fn invalid_tool_arguments_are_kept_verbatim() {
        assert_eq!(parse_arguments(Some(json!("{\"q\": 1}"))), json!({"q": 1}));
        assert_eq!(parse_arguments(Some(json!("{oops"))), json!("{oops"));
        assert_eq!(parse_arguments(None), json!({}));
        assert_eq!(arguments_text(&json!("{oops")), "{oops");
    }
}
