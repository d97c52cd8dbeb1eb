//! Credentials: kept in [`Secret`], which never formats them.

use reqwest::header::HeaderValue;
use std::fmt;

/// An API key or token. `Debug` never shows it, it has no `Display`, and it is not
/// serialisable, so it cannot leak into logs, errors or checkpoints by accident.
///
/// ```
/// use stategraph_llm::http::Secret;
/// let key = Secret::new("sk-very-secret");
/// assert_eq!(format!("{key:?}"), "Secret(***)");
/// assert_eq!(key.expose(), "sk-very-secret");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// Reads a key from an environment variable; empty values count as unset.
    pub fn from_env(var: &str) -> Option<Self> {
        non_empty_env(var).map(Secret)
    }

    /// The key itself, for putting into a request header. Do not format it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the key in `text` with `***` (servers sometimes quote
    /// the key they rejected).
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            // A key this short would match ordinary text; such a key is not a real one anyway.
            return text.to_string();
        }
        text.replace(&self.0, "***")
    }

    /// A header value holding `prefix` + the key, marked sensitive so that reqwest and hyper
    /// never print it.
    pub fn header_value(&self, prefix: &str) -> Option<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

impl Secret {
    /// [`header_value`](Self::header_value), or the error that says `service`'s key cannot be
    /// sent.
    pub fn auth_header(&self, service: &str, prefix: &str) -> Result<HeaderValue, String> {
        self.header_value(prefix).ok_or_else(|| {
            format!("the {service} API key contains characters that cannot be sent in a header")
        })
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Reads an environment variable, treating an empty value as unset.
pub fn non_empty_env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}
