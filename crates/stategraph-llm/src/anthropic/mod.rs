//! Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! System messages become the top-level `system` field, tool results become `tool_result`
//! blocks in a user turn, and a [`JsonSchemaFormat`](super::JsonSchemaFormat) is obtained by
//! forcing a call of a tool with that schema (`tool_choice: {type: tool, name}`): the tool's
//! input is returned as the reply's text, so [`structured`](fn@super::structured) works the
//! same on both providers.
//!
//! Layout: [`AnthropicConfig`] in `config.rs`; the request body in `request.rs`; a reply read
//! from one body in `reply.rs`, from an event stream in `stream.rs`; the client here.
//!
//! ```no_run
//! use stategraph_llm::anthropic::{AnthropicChat, AnthropicConfig};
//! # fn run() -> Result<(), stategraph_llm::LlmError> {
//! let model = AnthropicChat::new(AnthropicConfig::from_env(None)?)?;
//! # let _ = model; Ok(()) }
//! ```

mod config;
mod reply;
mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::HeaderValue;

use super::http::{decode_json, Endpoint, HttpClient, Secret};
use super::sse::is_event_stream;
use super::{ChatModel, ChatRequest, ChatResponse, LlmError};
pub use config::AnthropicConfig;
use reply::WireMessage;

/// The Anthropic API, used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";
/// How this provider is named in errors.
pub const PROVIDER: &str = "Anthropic";

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
        let base =
            Endpoint::checked_base("Anthropic", &config.base_url).map_err(LlmError::Config)?;
        let endpoint = Endpoint::new(PROVIDER, base.clone())
            .with_model(config.model.clone())
            .with_key_var("ANTHROPIC_API_KEY");
        let auth = config
            .api_key
            .as_ref()
            .map(|key| key.auth_header("Anthropic", ""))
            .transpose()
            .map_err(LlmError::Config)?;
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
}

#[async_trait]
impl ChatModel for AnthropicChat {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let span = crate::accounting::model_call_span(PROVIDER, model);
        crate::accounting::traced(span, self.call(request), |r: &ChatResponse| r.usage).await
    }
}

impl AnthropicChat {
    /// One request (streamed or not), inside its `model_call` span.
    async fn call(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.clone().unwrap_or_else(|| self.model.clone());
        let endpoint = self.endpoint.clone().with_model(model.clone());
        let sink = request.stream.clone();
        let format_tool = request.response_format.as_ref().map(|f| f.name.as_str());
        let body = request::body(&request, &model, self.default_max_tokens, sink.is_some());
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
        let Some(sink) = sink else {
            let wire: WireMessage = self.http.send_json(&endpoint, key, build).await?;
            return wire.into_response(format_tool, &model);
        };

        let response = self.http.send(&endpoint, key, build).await?;
        if is_event_stream(&response) {
            return stream::read(response, &endpoint, key, &sink, format_tool, &model).await;
        }
        // A server that ignored `stream: true` answers with one body; its text goes to the
        // sink at once.
        let bytes = response.bytes().await.map_err(|e| LlmError::Stream {
            provider: PROVIDER.to_string(),
            detail: e.to_string(),
        })?;
        let wire: WireMessage = decode_json(&endpoint, key, &bytes)?;
        let reply = wire.into_response(format_tool, &model)?;
        if !reply.message.content.is_empty() {
            sink(&reply.message.content);
        }
        Ok(reply)
    }
}
