//! [`AnthropicConfig`]: where the client talks to, with which key and model, read from code
//! or from the environment.

use super::{DEFAULT_BASE_URL, DEFAULT_MODEL};
use crate::http::{non_empty_env, HttpSettings, Secret};
use crate::LlmError;

/// Settings of an [`AnthropicChat`](super::AnthropicChat).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_key_is_not_configured() {
        let err = AnthropicConfig::from_lookup(None, &|_: &str| None).unwrap_err();
        assert!(matches!(err, LlmError::NotConfigured(_)));
    }
}
