//! Picks a provider from settings and the environment and builds the model.
//!
//! Order: an explicit provider name (settings, else `GRAPH_PROVIDER`); else Anthropic if
//! `ANTHROPIC_API_KEY` is set; else the OpenAI-compatible client if `OPENAI_API_KEY` or
//! `OPENAI_BASE_URL` is set; else [`LlmError::NotConfigured`] listing what to set.
//!
//! ```no_run
//! use stategraph_llm::provider::{from_env, ProviderSettings};
//! # fn run() -> Result<(), stategraph_llm::LlmError> {
//! // e.g. from a graph file's `model = "gpt-4o-mini"` or `--set model=...`
//! let model = from_env(ProviderSettings { model: Some("gpt-4o-mini".into()), ..Default::default() })?;
//! # let _ = model; Ok(()) }
//! ```

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use super::anthropic::{AnthropicChat, AnthropicConfig};
use super::http::{non_empty_env, HttpSettings, Secret};
use super::openai::{OpenAiChat, OpenAiConfig};
use super::{ChatModel, ChatRequest, ChatResponse, LlmError};

/// What the caller knows; anything left `None` comes from the environment.
#[derive(Clone, Debug, Default)]
pub struct ProviderSettings {
    /// `openai` (also `ollama`, `vllm`, `llamacpp`, `lmstudio`, `openrouter`, which use the
    /// same client) or `anthropic`.
    pub provider: Option<String>,
    /// The model name; else `GRAPH_MODEL`; else the provider's default.
    pub model: Option<String>,
    /// Overrides `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`.
    pub base_url: Option<String>,
    /// Overrides `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
    pub api_key: Option<Secret>,
    /// Timeouts and retries; defaults when `None`.
    pub http: Option<HttpSettings>,
}

/// Which client a provider name selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any OpenAI-compatible Chat Completions server.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// Parses a provider name (case-insensitive).
    pub fn parse(name: &str) -> Result<Self, LlmError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "ollama" | "vllm" | "llamacpp" | "llama.cpp"
            | "lmstudio" | "openrouter" => Ok(ProviderKind::OpenAi),
            "anthropic" | "claude" => Ok(ProviderKind::Anthropic),
            other => Err(LlmError::Config(format!(
                "unknown model provider `{other}`: use `openai` (any OpenAI-compatible server) \
                 or `anthropic`"
            ))),
        }
    }
}

/// The message of [`LlmError::NotConfigured`] when no provider can be found.
pub const NOT_CONFIGURED: &str = "no model provider is configured. Set one of:\n  \
     - Anthropic: ANTHROPIC_API_KEY=... (optional GRAPH_MODEL, ANTHROPIC_BASE_URL)\n  \
     - OpenAI: OPENAI_API_KEY=... (optional GRAPH_MODEL, default gpt-4o-mini)\n  \
     - a local Ollama: OPENAI_BASE_URL=http://localhost:11434/v1 GRAPH_MODEL=llama3.2\n  \
     - a llama.cpp server: OPENAI_BASE_URL=http://localhost:8080/v1 GRAPH_MODEL=<any name>\n\
     (GRAPH_PROVIDER=openai|anthropic picks one when both are set)";

/// Builds the model from `settings` and the process environment.
pub fn from_env(settings: ProviderSettings) -> Result<Arc<dyn ChatModel>, LlmError> {
    build(settings, &non_empty_env)
}

/// Builds the model from `settings` and an environment given as a lookup function (so tests
/// and embedders need not touch the process environment).
///
/// ```
/// use stategraph_llm::provider::{build, detect, ProviderKind, ProviderSettings};
/// let env = |var: &str| (var == "OPENAI_BASE_URL").then(|| "http://localhost:11434/v1".to_string());
/// assert_eq!(detect(&ProviderSettings::default(), &env).unwrap(), ProviderKind::OpenAi);
/// let err = build(ProviderSettings::default(), &|_: &str| None).err().unwrap();
/// assert!(err.to_string().contains("ANTHROPIC_API_KEY"));
/// ```
pub fn build(
    settings: ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let kind = detect(&settings, env)?;
    let http = settings.http.clone().unwrap_or_default();
    match kind {
        ProviderKind::OpenAi => {
            let mut config = if settings.base_url.is_some() && settings.model.is_none() {
                // An explicit base URL decides whether a default model applies.
                let base = settings.base_url.clone();
                let lookup = |var: &str| match var {
                    "OPENAI_BASE_URL" => base.clone(),
                    other => env(other),
                };
                OpenAiConfig::from_lookup(None, &lookup)?
            } else {
                OpenAiConfig::from_lookup(settings.model.clone(), env)?
            };
            if let Some(base) = settings.base_url {
                config.base_url = base;
            }
            if let Some(key) = settings.api_key {
                config.api_key = Some(key);
            }
            config.http = http;
            Ok(Arc::new(OpenAiChat::new(config)?))
        }
        ProviderKind::Anthropic => {
            let key_from_settings = settings.api_key.clone();
            let lookup = |var: &str| match var {
                "ANTHROPIC_API_KEY" => key_from_settings
                    .as_ref()
                    .map(|k| k.expose().to_string())
                    .or_else(|| env(var)),
                other => env(other),
            };
            let mut config = AnthropicConfig::from_lookup(settings.model.clone(), &lookup)?;
            if let Some(base) = settings.base_url {
                config.base_url = base;
            }
            config.http = http;
            Ok(Arc::new(AnthropicChat::new(config)?))
        }
    }
}

/// A [`ChatModel`] built by [`from_env`] on its first call, so a graph that holds it can be
/// built, drawn and its threads inspected with no key. Without a configured provider every
/// call fails with [`LlmError::NotConfigured`], which is not transient, so a node fails at
/// once instead of retrying; check [`from_env`] before a run to fail earlier still.
///
/// ```
/// use stategraph_llm::provider::{LazyModel, ProviderSettings};
/// let model = LazyModel::new(ProviderSettings::default()); // reads nothing yet
/// # let _ = model;
/// ```
pub struct LazyModel {
    settings: ProviderSettings,
    model: OnceLock<Arc<dyn ChatModel>>,
}

impl LazyModel {
    /// A model to be built from `settings` and the environment when first called.
    pub fn new(settings: ProviderSettings) -> Self {
        LazyModel {
            settings,
            model: OnceLock::new(),
        }
    }

    fn get(&self) -> Result<Arc<dyn ChatModel>, LlmError> {
        if let Some(model) = self.model.get() {
            return Ok(model.clone());
        }
        let built = from_env(self.settings.clone())?;
        // Two first calls racing may both build one; either is fine, the first is kept.
        Ok(self.model.get_or_init(|| built).clone())
    }
}

#[async_trait]
impl ChatModel for LazyModel {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.get()?.chat(request).await
    }
}

/// Decides which provider `settings` and `env` select, without building anything.
pub fn detect(
    settings: &ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderKind, LlmError> {
    if let Some(name) = settings.provider.clone().or_else(|| env("GRAPH_PROVIDER")) {
        return ProviderKind::parse(&name);
    }
    if env("ANTHROPIC_API_KEY").is_some() {
        Ok(ProviderKind::Anthropic)
    } else if env("OPENAI_API_KEY").is_some() || env("OPENAI_BASE_URL").is_some() {
        Ok(ProviderKind::OpenAi)
    } else if settings.base_url.is_some() {
        // A base URL alone (e.g. `--set base_url=http://localhost:11434/v1`) means a local
        // OpenAI-compatible server.
        Ok(ProviderKind::OpenAi)
    } else {
        Err(LlmError::NotConfigured(NOT_CONFIGURED.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |var| pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone())
    }

    #[test]
    fn detection_prefers_anthropic_then_openai() {
        let s = ProviderSettings::default();
        let both = env_of(&[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")]);
        assert_eq!(detect(&s, &both).unwrap(), ProviderKind::Anthropic);
        let forced = env_of(&[
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "o"),
            ("GRAPH_PROVIDER", "openai"),
        ]);
        assert_eq!(detect(&s, &forced).unwrap(), ProviderKind::OpenAi);
        let local = env_of(&[("OPENAI_BASE_URL", "http://localhost:8080/v1")]);
        assert_eq!(detect(&s, &local).unwrap(), ProviderKind::OpenAi);
    }

    #[test]
    fn nothing_configured_says_what_to_set() {
        let err = build(ProviderSettings::default(), &env_of(&[]))
            .err()
            .unwrap();
        let text = err.to_string();
        for needle in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL=http://localhost:11434/v1",
            "llama.cpp",
        ] {
            assert!(text.contains(needle), "missing {needle} in {text}");
        }
        assert!(matches!(err, LlmError::NotConfigured(_)));
    }

    #[test]
    fn unknown_provider_is_a_config_error() {
        let settings = ProviderSettings {
            provider: Some("gemini".into()),
            ..Default::default()
        };
        assert!(matches!(
            build(settings, &env_of(&[])).err(),
            Some(LlmError::Config(_))
        ));
    }

    #[test]
    fn explicit_settings_build_both_providers() {
        let openai = ProviderSettings {
            provider: Some("ollama".into()),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            model: Some("llama3.2".into()),
            ..Default::default()
        };
        assert!(build(openai, &env_of(&[])).is_ok());
        let anthropic = ProviderSettings {
            provider: Some("anthropic".into()),
            api_key: Some(Secret::new("sk-ant-test")),
            ..Default::default()
        };
        assert!(build(anthropic, &env_of(&[])).is_ok());
    }
}
