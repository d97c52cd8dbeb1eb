//! [`HttpError`]: a failed HTTP exchange, classified, with what to check.

use super::Endpoint;
use std::time::Duration;

/// A failed HTTP exchange, already classified. The message names the service, its base URL
/// and the model, and says what to check; it never contains a key.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HttpError {
    /// 401 or 403.
    #[error("{endpoint} refused the credentials (HTTP {status}): {hint}. Server said: {body}")]
    Unauthorized {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// 401 or 403.
        status: u16,
        /// What to check.
        hint: String,
        /// The server's explanation (redacted, shortened).
        body: String,
    },
    /// 404.
    #[error("{endpoint} answered HTTP 404 Not Found: {hint}. Server said: {body}")]
    NotFound {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// What to check.
        hint: String,
        /// The server's explanation (redacted, shortened).
        body: String,
    },
    /// 429 on every attempt, or a `Retry-After` longer than the policy allows.
    #[error("{endpoint} is rate limiting (HTTP 429) after {}{}. Server said: {body}", attempts_text(*attempts),
        retry_after.map(|d| format!("; it asked to wait {}s", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// Attempts made.
        attempts: u32,
        /// The server's last `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// The server's explanation (redacted, shortened).
        body: String,
    },
    /// 5xx on every attempt.
    #[error(
        "{endpoint} failed with HTTP {status} after {}. Server said: {body}", attempts_text(*attempts)
    )]
    Server {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// The last status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The server's explanation (redacted, shortened).
        body: String,
    },
    /// Any other non-success status (400, 422, ...): the request itself is wrong.
    #[error("{endpoint} rejected the request with HTTP {status}. Server said: {body}")]
    Rejected {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// The status.
        status: u16,
        /// The server's explanation (redacted, shortened).
        body: String,
    },
    /// No answer in time on every attempt.
    #[error("{endpoint} did not answer in time after {} ({detail})", attempts_text(*attempts))]
    Timeout {
        /// Who was asked.
        endpoint: Box<Endpoint>,
        /// Attempts made.
        attempts: u32,
        /// Which timeout fired.
        detail: String,
    },
    /// Nothing listens at the address (connection refused): the server is down or the URL is
    /// wrong. Not retried, since a server that is not there will not be there a second later;
    /// the call fails at once.
    #[error("cannot reach {} (connection refused): {detail}. Check the base URL and that the server is running", endpoint.target())]
    Refused {
        /// Who was asked.
        endpoint: Box<Endpoint>,
        /// The transport error.
        detail: String,
    },
    /// Could not connect, or the connection broke, on every attempt.
    #[error("cannot reach {} after {}: {detail}. Check the base URL and that the server is running", endpoint.target(), attempts_text(*attempts))]
    Connect {
        /// Who was asked.
        endpoint: Box<Endpoint>,
        /// Attempts made.
        attempts: u32,
        /// The transport error.
        detail: String,
    },
    /// The response body was not the JSON the client expected.
    #[error("{endpoint} sent a response that is not the expected JSON: {detail}. Body starts: {excerpt}")]
    InvalidBody {
        /// Who answered.
        endpoint: Box<Endpoint>,
        /// The decoding error, with the JSON path where it failed.
        detail: String,
        /// The start of the body (redacted).
        excerpt: String,
    },
    /// The client could not be built (TLS backend, bad header value, bad URL).
    #[error("could not set up a client for {endpoint}: {detail}")]
    Setup {
        /// For which service.
        endpoint: Box<Endpoint>,
        /// What went wrong.
        detail: String,
    },
}

impl HttpError {
    /// True for errors that may go away if the same request is sent again later: rate
    /// limits, server errors, timeouts and connection failures.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            HttpError::RateLimited { .. }
                | HttpError::Server { .. }
                | HttpError::Timeout { .. }
                | HttpError::Connect { .. }
        )
    }

    /// The HTTP status behind the error, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Unauthorized { status, .. }
            | HttpError::Server { status, .. }
            | HttpError::Rejected { status, .. } => Some(*status),
            HttpError::NotFound { .. } => Some(404),
            HttpError::RateLimited { .. } => Some(429),
            _ => None,
        }
    }

    /// Who the failed request went to.
    pub fn endpoint(&self) -> &Endpoint {
        match self {
            HttpError::Unauthorized { endpoint, .. }
            | HttpError::NotFound { endpoint, .. }
            | HttpError::RateLimited { endpoint, .. }
            | HttpError::Server { endpoint, .. }
            | HttpError::Rejected { endpoint, .. }
            | HttpError::Timeout { endpoint, .. }
            | HttpError::Refused { endpoint, .. }
            | HttpError::Connect { endpoint, .. }
            | HttpError::InvalidBody { endpoint, .. }
            | HttpError::Setup { endpoint, .. } => endpoint,
        }
    }
}

/// `1 attempt`, `4 attempts`: how HTTP retries are counted in these messages, and structured
/// replies in `LlmError`'s (which wraps this layer's errors, so the words live down here).
pub(crate) fn attempts_text(attempts: u32) -> String {
    match attempts {
        1 => "1 attempt".to_string(),
        n => format!("{n} attempts"),
    }
}
