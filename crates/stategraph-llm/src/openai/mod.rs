//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`).
//!
//! One client covers OpenAI, Ollama (`http://localhost:11434/v1`), vLLM, llama.cpp's server
//! (`http://localhost:8080/v1`), LM Studio and OpenRouter: they all speak this wire format.
//!
//! Layout: [`OpenAiConfig`] in `config.rs`; the request body in `request.rs`; a reply read
//! from one body in `reply.rs`, from an event stream in `stream.rs`; the client here.
//!
//! ```no_run
//! use stategraph_llm::openai::{OpenAiChat, OpenAiConfig};
//! use stategraph_llm::{ChatModel, ChatRequest, Message};
//! # async fn run() -> Result<(), stategraph_llm::LlmError> {
//! // A local Ollama needs no key.
//! let model = OpenAiChat::new(
//!     OpenAiConfig::new("llama3.2").with_base_url("http://localhost:11434/v1"),
//! )?;
//! let reply = model.chat(ChatRequest::new(vec![Message::user("Hello")])).await?;
//! # let _ = reply; Ok(()) }
//! ```

mod config;
mod reply;
mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::{HeaderValue, AUTHORIZATION};

use super::http::{decode_json, Endpoint, HttpClient, Secret};
use super::sse::is_event_stream;
use super::{ChatModel, ChatRequest, ChatResponse, LlmError};
pub use config::OpenAiConfig;
use reply::Completion;

/// The OpenAI API, used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used against the OpenAI API when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// How this provider is named in errors.
pub const PROVIDER: &str = "OpenAI-compatible API";

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
        let base = Endpoint::checked_base("OpenAI", &config.base_url).map_err(LlmError::Config)?;
        let endpoint = Endpoint::new(PROVIDER, base.clone())
            .with_model(config.model.clone())
            .with_key_var("OPENAI_API_KEY");
        let auth = config
            .api_key
            .as_ref()
            .map(|key| key.auth_header("OpenAI", "Bearer "))
            .transpose()
            .map_err(LlmError::Config)?;
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
}

#[async_trait]
impl ChatModel for OpenAiChat {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let span = crate::accounting::model_call_span(PROVIDER, model);
        crate::accounting::traced(span, self.call(request), |r: &ChatResponse| r.usage).await
    }
}

impl OpenAiChat {
    /// One request (streamed or not), inside its `model_call` span.
    async fn call(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let model = request.model.clone().unwrap_or_else(|| self.model.clone());
        let endpoint = self.endpoint.clone().with_model(model.clone());
        let sink = request.stream.clone();
        let body = request::body(&request, &model, &self.max_tokens_field, sink.is_some());
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
        if is_event_stream(&response) {
            return stream::read(response, &endpoint, key, &sink, &model).await;
        }
        // Some servers ignore `stream: true` and answer with one body; its text goes to the
        // sink at once.
        let bytes = response.bytes().await.map_err(|e| LlmError::Stream {
            provider: PROVIDER.to_string(),
            detail: e.to_string(),
        })?;
        let completion: Completion = decode_json(&endpoint, key, &bytes)?;
        let reply = completion.into_response(&model)?;
        if !reply.message.content.is_empty() {
            sink(&reply.message.content);
        }
        Ok(reply)
    }
}
