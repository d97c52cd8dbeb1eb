//! Where models are called.
//!
//! A node talks to a model through the [`ChatModel`] trait: a [`ChatRequest`] (messages,
//! tools, an optional JSON-schema reply format, an optional token sink for streaming) goes in,
//! a [`ChatResponse`] (one assistant [`Message`], its [`Usage`]) comes out.
//!
//! Layout:
//! - [`openai`]: OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM, llama.cpp's server,
//!   LM Studio, OpenRouter).
//! - [`anthropic`]: Anthropic Messages.
//! - [`provider`]: picks and builds one of those from settings and the environment.
//! - [`structured`](mod@structured): typed replies: a schema derived from a Rust type, the reply parsed
//!   into it, invalid replies retried with the error shown to the model.
//! - [`accounting`]: token usage, prices and a per-node [`UsageLedger`] kept in graph state;
//!   every request the model answered counts, retries of an unusable structured reply included.
//! - [`fake`]: [`FakeChatModel`], a scripted model for tests.
//! - [`http`]: timeouts, retries, `Retry-After`, error classification; shared with `tools`.
//!
//! Architecture invariant: this layer knows nothing of graphs. The engine passes a
//! [`TokenSink`] to stream text and reads [`LlmError::is_transient`] to decide on retries;
//! nothing here depends on the runtime, and no API key ever reaches a log, an error or a
//! `Debug` string (see [`http::Secret`]).
//!
//! ```no_run
//! use stategraph_llm::{provider, ChatRequest, Message};
//! # async fn run() -> Result<(), stategraph_llm::LlmError> {
//! let model = provider::from_env(provider::ProviderSettings::default())?;
//! let reply = model
//!     .chat(ChatRequest::new(vec![Message::user("Name one prime number.")]))
//!     .await?;
//! println!("{} ({} tokens out)", reply.message.content, reply.usage.output_tokens);
//! # Ok(()) }
//! ```

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod accounting;
pub mod anthropic;
mod error;
pub mod fake;
pub mod http;
mod model_settings;
pub mod openai;
pub mod provider;
mod sse;
pub mod structured;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use accounting::{usd, NodeUsage, Pricing, Usage, UsageLedger};
pub use error::LlmError;
pub use fake::FakeChatModel;
pub use model_settings::ModelSettings;
pub use structured::{
    schema_for, strict_schema, structured, structured_validated, StructuredOptions,
};

/// A chat model: one request in, one assistant message out.
///
/// Implemented by [`openai::OpenAiChat`], [`anthropic::AnthropicChat`] and
/// [`FakeChatModel`]; object safe, so graphs hold an `Arc<dyn ChatModel>`.
///
/// ```
/// use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel, Message};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = FakeChatModel::with_replies(["Paris"]);
/// let reply = model.chat(ChatRequest::new(vec![Message::user("Capital of France?")])).await?;
/// assert_eq!(reply.message.content, "Paris");
/// # Ok::<(), stategraph_llm::LlmError>(()) });
/// ```
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends the conversation and returns the model's reply. When `request.stream` is set,
    /// text deltas are passed to it as they arrive, and the full reply is still returned.
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError>;
}

#[async_trait]
impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(request).await
    }
}

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user (or the program acting for one).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering the assistant's [`ToolCall`] with the same id.
    Tool,
}

/// One message of a conversation. Serialisable, so conversations can live in graph state.
///
/// ```
/// use stategraph_llm::{Message, Role};
/// let m = Message::tool_result("call_1", "42 results");
/// assert_eq!(m.role, Role::Tool);
/// assert_eq!(m.tool_call_id.as_deref(), Some("call_1"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text. May be empty for an assistant message that only calls tools.
    #[serde(default)]
    pub content: String,
    /// Tools the assistant asks to call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The message's identity in a conversation kept in graph state: a write with the same id
    /// replaces it (see [`stategraph_prebuilt::add_messages`]). Never sent to a provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Marks a write that removes the message with this `id` from a conversation kept in
    /// graph state ([`Message::remove`]); never stored, never sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remove: bool,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            id: None,
            remove: false,
        }
    }

    /// The same message with this id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// A write that removes the message with id `id` from a conversation kept in graph state.
    ///
    /// ```
    /// use stategraph_llm::Message;
    /// let gone = Message::remove("a");
    /// assert_eq!(gone.id.as_deref(), Some("a"));
    /// // In graph state, `stategraph_prebuilt::add_messages` takes it as "drop message a".
    /// ```
    pub fn remove(id: impl Into<String>) -> Self {
        Message {
            id: Some(id.into()),
            remove: true,
            ..Message::plain(Role::User, "")
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::plain(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::plain(Role::Assistant, content)
    }

    /// An assistant message calling tools (with optional text alongside).
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Message::plain(Role::Assistant, content)
        }
    }

    /// The answer to the tool call with id `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            ..Message::plain(Role::Tool, content)
        }
    }
}

/// A tool the model may call: a name, what it does, and a JSON schema of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model uses to call it (letters, digits, `_` and `-`).
    pub name: String,
    /// What the tool does and when to use it; the model reads this.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool whose arguments are described by `parameters`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }

    /// A tool whose arguments are the Rust type `A` (schema derived with schemars).
    ///
    /// ```
    /// #[derive(schemars::JsonSchema, serde::Deserialize)]
    /// struct SearchArgs { query: String }
    /// let tool = stategraph_llm::ToolSpec::for_args::<SearchArgs>("search", "Search the web");
    /// assert_eq!(tool.parameters["properties"]["query"]["type"], "string");
    /// ```
    pub fn for_args<A: JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        ToolSpec::new(name, description, schema_for::<A>())
    }
}

/// A tool call made by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The provider's id for the call; the [`Role::Tool`] answer must carry it.
    pub id: String,
    /// Which tool.
    pub name: String,
    /// The arguments object. If the model produced arguments that are not valid JSON, they
    /// are kept as a JSON string so that the caller can report the problem back to it.
    pub arguments: Value,
}

impl ToolCall {
    /// Decodes the arguments into `A`.
    pub fn parse_arguments<A: serde::de::DeserializeOwned>(&self) -> Result<A, serde_json::Error> {
        serde_json::from_value(self.arguments.clone())
    }
}

/// Which tool the model should call, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// A JSON-schema reply format ("structured output").
///
/// On the OpenAI path it is sent as
/// `response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`;
/// on Anthropic as a forced call of a tool with this name and schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// The schema's name, e.g. the Rust type's name (`Plan`).
    pub name: String,
    /// The JSON schema the reply must match.
    pub schema: Value,
    /// Asks the provider to enforce the schema exactly (OpenAI's strict mode).
    pub strict: bool,
}

impl JsonSchemaFormat {
    /// A strict format; the schema is made to conform to OpenAI's strict-mode rules with
    /// [`strict_schema`].
    pub fn strict(name: impl Into<String>, schema: Value) -> Self {
        JsonSchemaFormat {
            name: structured::sanitize_name(&name.into()),
            schema: strict_schema(schema),
            strict: true,
        }
    }
}

/// Receives each text delta while a reply streams in. The engine forwards these as graph
/// stream events.
pub type TokenSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One call to a model.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_llm::{ChatRequest, Message, TokenSink};
/// let sink: TokenSink = Arc::new(|delta: &str| print!("{delta}"));
/// let request = ChatRequest::new(vec![Message::user("Hi")])
///     .with_temperature(0.2)
///     .with_max_tokens(200)
///     .with_stream(sink);
/// assert!(request.stream.is_some());
/// ```
#[derive(Clone, Default)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Which tool to call; `None` leaves it to the provider's default.
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one reply (OpenAI's
    /// `parallel_tool_calls`; Anthropic's `disable_parallel_tool_use` is its negation).
    /// `None` leaves it to the provider (allowed by both).
    pub parallel_tool_calls: Option<bool>,
    /// A JSON schema the reply must match.
    pub response_format: Option<JsonSchemaFormat>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// A cap on output tokens.
    pub max_tokens: Option<u32>,
    /// Overrides the client's configured model for this call.
    pub model: Option<String>,
    /// When set, the reply is streamed and each text delta is passed here.
    pub stream: Option<TokenSink>,
}

impl ChatRequest {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    /// Offers tools to the model.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets which tool the model should call.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Allows or forbids several tool calls in one reply.
    pub fn with_parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }

    /// Asks for a reply matching a JSON schema.
    pub fn with_response_format(mut self, format: JsonSchemaFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the output tokens.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Uses another model than the client's default for this call.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Streams the reply, passing each text delta to `sink`.
    pub fn with_stream(mut self, sink: TokenSink) -> Self {
        self.stream = Some(sink);
        self
    }
}

impl fmt::Debug for ChatRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatRequest")
            .field("messages", &self.messages)
            .field("tools", &self.tools)
            .field("tool_choice", &self.tool_choice)
            .field("parallel_tool_calls", &self.parallel_tool_calls)
            .field("response_format", &self.response_format)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("model", &self.model)
            .field("stream", &self.stream.as_ref().map(|_| "TokenSink"))
            .finish()
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the reply.
    Stop,
    /// The output token cap was reached; the reply is cut short.
    Length,
    /// The model is calling tools.
    ToolCalls,
    /// The provider filtered the reply.
    ContentFilter,
    /// Anything else, as the provider named it.
    Other(String),
}

/// The model's reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message (text and/or tool calls).
    pub message: Message,
    /// Tokens used by this call.
    pub usage: Usage,
    /// The model that answered, as the provider reports it.
    pub model: String,
    /// Why it stopped, if the provider said.
    pub finish_reason: Option<FinishReason>,
}
