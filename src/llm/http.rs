//! The one place where model and tool clients talk HTTP: timeouts, retries with backoff,
//! `Retry-After`, status-code classification and JSON decoding.
//!
//! Every provider (OpenAI-compatible, Anthropic, Tavily, page fetch) goes through
//! [`HttpClient::send`], so the retry and error rules are the same everywhere.
//!
//! Architecture invariant: nothing here ever formats a credential. Keys travel only inside
//! [`Secret`] (whose `Debug` prints `***`) and inside request headers marked sensitive; error
//! bodies quoted back from a server are passed through [`Secret::redact`] before they are
//! stored in an error.

use super::error::attempts_text;
use std::fmt;
use std::time::Duration;

use rand::Rng;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;

/// How many characters of a server's error body are kept in an error message.
const BODY_EXCERPT_CHARS: usize = 600;

/// An API key or token. `Debug` never shows it, it has no `Display`, and it is not
/// serialisable, so it cannot leak into logs, errors or checkpoints by accident.
///
/// ```
/// use stategraph::llm::http::Secret;
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

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Reads an environment variable, treating an empty value as unset.
pub(crate) fn non_empty_env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

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

/// When and how often to retry. Retries happen on 429, 5xx, timeouts and connections that
/// broke or could not be made; never on a refused connection (nothing listens there).
///
/// This is the one layer that retries a request: an [`HttpError`] coming out of
/// [`HttpClient::send`] has had its retries, so callers (a node's retry policy) should not
/// send the call again (see [`LlmError::should_retry`](crate::llm::LlmError::should_retry)).
///
/// ```
/// use std::time::Duration;
/// use stategraph::llm::http::RetryPolicy;
/// // Tests use tiny delays so that a retry costs milliseconds.
/// let fast = RetryPolicy { max_retries: 2, initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
/// assert!(fast.backoff(1) <= Duration::from_millis(2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    /// The delay before the first retry; it doubles for each further retry.
    pub initial_backoff: Duration,
    /// The cap on the exponential delay.
    pub max_backoff: Duration,
    /// The longest `Retry-After` that is waited out; a server asking for longer makes the
    /// call fail at once with [`HttpError::RateLimited`], because stalling a graph for
    /// minutes is worse than letting its retry policy decide.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The delay before retry number `retry` (1-based): exponential, capped, with jitter
    /// in [50%, 100%] so that many clients hit by the same outage do not retry in step.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = 2u32.saturating_pow(retry.saturating_sub(1));
        let base = self
            .initial_backoff
            .saturating_mul(exp)
            .min(self.max_backoff);
        let factor: f64 = rand::thread_rng().gen_range(0.5..=1.0);
        base.mul_f64(factor)
    }
}

/// Timeouts and retries for one client.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    /// Time allowed to open the TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for the response or between two reads of its
    /// body. Generous by default, because a model may think for a while before it answers.
    pub read_timeout: Duration,
    /// An optional cap on a whole request, body included. Leave it `None` for streaming
    /// model calls (a long answer is not a hung one); page fetches set it.
    pub total_timeout: Option<Duration>,
    /// Retry rules.
    pub retry: RetryPolicy,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(180),
            total_timeout: None,
            retry: RetryPolicy::default(),
            user_agent: concat!("stategraph/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }
}

impl HttpSettings {
    /// Settings with millisecond timeouts and backoff, for tests against local servers.
    pub fn for_tests() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
            total_timeout: None,
            retry: RetryPolicy {
                max_retries: 2,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(5),
                max_retry_after: Duration::from_secs(2),
            },
            user_agent: HttpSettings::default().user_agent,
        }
    }
}

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

/// A reqwest client plus the retry rules. Cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: reqwest::Client,
    settings: HttpSettings,
}

impl HttpClient {
    /// Builds a client with the given timeouts. `endpoint` only labels a setup error.
    pub fn new(settings: HttpSettings, endpoint: &Endpoint) -> Result<Self, HttpError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .read_timeout(settings.read_timeout)
            .user_agent(settings.user_agent.clone());
        if let Some(total) = settings.total_timeout {
            builder = builder.timeout(total);
        }
        let client = builder.build().map_err(|e| HttpError::Setup {
            endpoint: Box::new(endpoint.clone()),
            detail: error_chain(&e),
        })?;
        Ok(HttpClient { client, settings })
    }

    /// The underlying reqwest client, for building requests.
    pub fn inner(&self) -> &reqwest::Client {
        &self.client
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// Sends the request that `build` makes, retrying on 429, 5xx, timeouts and connection
    /// errors, and returns the first successful (2xx) response, its body unread.
    ///
    /// `build` is called once per attempt because a request cannot be replayed. `secret`
    /// is used only to redact quoted error bodies.
    pub async fn send<F>(
        &self,
        endpoint: &Endpoint,
        secret: Option<&Secret>,
        build: F,
    ) -> Result<Response, HttpError>
    where
        F: Fn(&reqwest::Client) -> RequestBuilder,
    {
        let policy = &self.settings.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let outcome = build(&self.client).send().await;
            let can_retry = attempt <= policy.max_retries;
            let (failure, asked_wait) = match outcome {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let asked = retry_after(response.headers());
                    let body = excerpt(&read_error_body(response).await, secret);
                    (
                        classify_status(endpoint, status, attempt, asked, body),
                        asked,
                    )
                }
                Err(e) => (classify_transport(endpoint, attempt, &e, secret), None),
            };
            if !failure.is_transient() || !can_retry {
                return Err(failure);
            }
            // A server that says how long to wait (429, and often 503) knows better than
            // our backoff; one asking for too long is not waited for at all.
            let wait = match asked_wait {
                Some(asked) if asked > policy.max_retry_after => return Err(failure),
                Some(asked) => asked,
                None => policy.backoff(attempt),
            };
            tracing::debug!(
                provider = %endpoint.provider,
                attempt,
                wait_ms = wait.as_millis() as u64,
                error = %failure,
                "retrying request"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// [`send`](Self::send), then decodes the JSON body into `T`. A body that is not valid
    /// JSON, or not of `T`'s shape, is an [`HttpError::InvalidBody`] naming the JSON path
    /// where decoding failed.
    pub async fn send_json<T, F>(
        &self,
        endpoint: &Endpoint,
        secret: Option<&Secret>,
        build: F,
    ) -> Result<T, HttpError>
    where
        T: DeserializeOwned,
        F: Fn(&reqwest::Client) -> RequestBuilder,
    {
        let response = self.send(endpoint, secret, build).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| classify_transport(endpoint, 1, &e, secret))?;
        decode_json(endpoint, secret, &bytes)
    }
}

/// Decodes `bytes` as `T`, reporting the JSON path of a mismatch.
pub fn decode_json<T: DeserializeOwned>(
    endpoint: &Endpoint,
    secret: Option<&Secret>,
    bytes: &[u8],
) -> Result<T, HttpError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| HttpError::InvalidBody {
        endpoint: Box::new(endpoint.clone()),
        detail: e.to_string(),
        excerpt: excerpt(&String::from_utf8_lossy(bytes), secret),
    })
}

/// Shortens and redacts text quoted from a server.
pub fn excerpt(text: &str, secret: Option<&Secret>) -> String {
    let text = text.trim();
    let text = match secret {
        Some(secret) => secret.redact(text),
        None => text.to_string(),
    };
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    let mut chars = text.chars();
    let short: String = chars.by_ref().take(BODY_EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        format!("{short}…")
    } else {
        short
    }
}

/// Reads an error body, but not an endless one: only its first few kilobytes matter.
async fn read_error_body(mut response: Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > 8 * 1024 {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// `Retry-After` in its seconds form (the form APIs use), or OpenAI's `retry-after-ms`.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1.0e9)
        .map(Duration::from_secs_f64)
}

fn classify_status(
    endpoint: &Endpoint,
    status: StatusCode,
    attempts: u32,
    retry_after: Option<Duration>,
    body: String,
) -> HttpError {
    let endpoint = Box::new(endpoint.clone());
    match status.as_u16() {
        401 | 403 => {
            let hint = match &endpoint.key_var {
                Some(var) => format!(
                    "check that {var} holds a valid key for {} and that the key may use {}",
                    endpoint.base_url,
                    endpoint
                        .model
                        .as_deref()
                        .map(|m| format!("model `{m}`"))
                        .unwrap_or_else(|| "this API".to_string())
                ),
                None => "check the API key and its permissions".to_string(),
            };
            HttpError::Unauthorized {
                endpoint,
                status: status.as_u16(),
                hint,
                body,
            }
        }
        404 => {
            let hint = match &endpoint.model {
                Some(model) => format!(
                    "check the base URL {} (OpenAI-compatible servers usually end in /v1) \
                     and that model `{model}` exists there",
                    endpoint.base_url
                ),
                None => format!("check the URL {}", endpoint.base_url),
            };
            HttpError::NotFound {
                endpoint,
                hint,
                body,
            }
        }
        429 => HttpError::RateLimited {
            endpoint,
            attempts,
            retry_after,
            body,
        },
        s if status.is_server_error() => HttpError::Server {
            endpoint,
            status: s,
            attempts,
            body,
        },
        s => HttpError::Rejected {
            endpoint,
            status: s,
            body,
        },
    }
}

fn classify_transport(
    endpoint: &Endpoint,
    attempts: u32,
    error: &reqwest::Error,
    secret: Option<&Secret>,
) -> HttpError {
    let detail = excerpt(&error_chain(error), secret);
    if error.is_timeout() || chain_mentions_timeout(error) {
        HttpError::Timeout {
            endpoint: Box::new(endpoint.clone()),
            attempts,
            detail,
        }
    } else if error.is_builder() {
        HttpError::Setup {
            endpoint: Box::new(endpoint.clone()),
            detail,
        }
    } else if chain_has_io_kind(error, std::io::ErrorKind::ConnectionRefused) {
        HttpError::Refused {
            endpoint: Box::new(endpoint.clone()),
            detail,
        }
    } else {
        HttpError::Connect {
            endpoint: Box::new(endpoint.clone()),
            attempts,
            detail,
        }
    }
}

/// reqwest's read timeout surfaces as an io error deep in the chain on some paths.
fn chain_mentions_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    chain_has_io_kind(error, std::io::ErrorKind::TimedOut)
}

/// True when an io error of `kind` is among the error's causes.
fn chain_has_io_kind(error: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == kind {
                return true;
            }
        }
        current = e.source();
    }
    false
}

/// An error and its causes on one line: reqwest's top-level message alone
/// ("error sending request") does not say what went wrong.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut current = error.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        current = e.source();
    }
    out
}

/// Classifies a transport error that happened while reading a body after the response
/// arrived (a stream cut short, a read timeout mid-answer).
pub fn body_error(
    endpoint: &Endpoint,
    error: &reqwest::Error,
    secret: Option<&Secret>,
) -> HttpError {
    classify_transport(endpoint, 1, error, secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            max_retry_after: Duration::from_secs(1),
        };
        assert!(policy.backoff(1) <= Duration::from_millis(100));
        assert!(policy.backoff(1) >= Duration::from_millis(50));
        assert!(policy.backoff(3) >= Duration::from_millis(200));
        assert!(policy.backoff(30) <= Duration::from_millis(400));
    }

    #[test]
    fn retry_after_reads_seconds_and_ms() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut dated = HeaderMap::new();
        dated.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn secrets_are_redacted_and_hidden() {
        let key = Secret::new("sk-abcdef123456");
        assert_eq!(
            excerpt("bad key sk-abcdef123456 given", Some(&key)),
            "bad key *** given"
        );
        assert!(!format!("{key:?}").contains("abcdef"));
    }
}
