//! Who a request goes to, as error messages name it.

use std::fmt;

/// Who a request goes to, for error messages: never holds a credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Human name of the service, e.g. `OpenAI-compatible API`, `Anthropic`, `Tavily`.
    pub provider: String,
    /// The base URL the client was configured with (or the fetched URL).
    pub base_url: String,
    /// The model, when the service is a model.
    pub model: Option<String>,
    /// The environment variable that holds the credential, named in 401/403 hints.
    pub key_var: Option<String>,
}

impl Endpoint {
    /// An endpoint for error messages.
    pub fn new(provider: impl Into<String>, base_url: impl Into<String>) -> Self {
        Endpoint {
            provider: provider.into(),
            base_url: base_url.into(),
            model: None,
            key_var: None,
        }
    }

    /// `url` without surrounding space or a trailing `/`, checked to be a URL; the error names
    /// whose base URL it is (`service`, e.g. `Anthropic`).
    pub fn checked_base(service: &str, url: &str) -> Result<String, String> {
        let base = url.trim().trim_end_matches('/').to_string();
        match reqwest::Url::parse(&base) {
            Ok(_) => Ok(base),
            Err(e) => Err(format!(
                "{service} base URL `{base}` is not a valid URL: {e}"
            )),
        }
    }

    /// Names the model in error messages.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Names the environment variable that holds the key, for 401/403 hints.
    pub fn with_key_var(mut self, var: impl Into<String>) -> Self {
        self.key_var = Some(var.into());
        self
    }
}

impl Endpoint {
    /// What a request went to, for "cannot reach ...": `the model at URL (provider, model
    /// `m`)` for a model, else `provider at URL`.
    pub fn target(&self) -> String {
        match &self.model {
            Some(model) => format!(
                "the model at {} ({}, model `{model}`)",
                self.base_url, self.provider
            ),
            None => format!("{} at {}", self.provider, self.base_url),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.provider, self.base_url)?;
        if let Some(model) = &self.model {
            write!(f, " (model `{model}`)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Secret;

    #[test]
    fn a_base_url_is_trimmed_and_checked_and_a_key_that_cannot_be_a_header_is_named() {
        assert_eq!(
            Endpoint::checked_base("Anthropic", " http://127.0.0.1:9/v1/ ").unwrap(),
            "http://127.0.0.1:9/v1"
        );
        let bad = Endpoint::checked_base("Tavily", "no url").unwrap_err();
        assert!(
            bad.starts_with("Tavily base URL `no url` is not a valid URL:"),
            "{bad}"
        );
        let header = Secret::new("sk-1")
            .auth_header("OpenAI", "Bearer ")
            .unwrap();
        assert!(header.is_sensitive());
        assert_eq!(header.to_str().unwrap(), "Bearer sk-1");
        assert_eq!(
            Secret::new("sk\n1")
                .auth_header("OpenAI", "Bearer ")
                .unwrap_err(),
            "the OpenAI API key contains characters that cannot be sent in a header"
        );
    }
}
