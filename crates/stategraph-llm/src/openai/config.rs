//! [`OpenAiConfig`]: which server the client talks to, with which key and model, read from
//! code or from the environment.

use super::{DEFAULT_BASE_URL, DEFAULT_MODEL};
use crate::http::{non_empty_env, Endpoint, HttpSettings, Secret};
use crate::LlmError;

/// Settings of an [`OpenAiChat`](super::OpenAiChat).
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
            // OpenAI's own server, its URL read as the client reads it (no surrounding space,
            // no trailing `/`). Text that is no URL is not OpenAI's; the client says what is
            // wrong with it.
            None if Endpoint::checked_base("OpenAI", &base_url)
                .is_ok_and(|base| base == DEFAULT_BASE_URL) =>
            {
                DEFAULT_MODEL.to_string()
            }
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
        // OpenAI's URL written another way is still OpenAI's: its default model applies.
        let config = OpenAiConfig::from_lookup(
            None,
            &env(&[("OPENAI_BASE_URL", " https://api.openai.com/v1/ ")]),
        )
        .unwrap();
        assert_eq!(config.model, DEFAULT_MODEL);
        let err =
            OpenAiConfig::from_lookup(None, &env(&[("OPENAI_BASE_URL", "not a url")])).unwrap_err();
        assert!(err.to_string().contains("GRAPH_MODEL"), "{err}");
    }
}
