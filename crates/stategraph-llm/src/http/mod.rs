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

mod classify;
mod endpoint;
mod error;
mod secret;
mod settings;

pub(crate) use classify::error_chain;
pub use classify::{body_error, decode_json, excerpt};
pub use endpoint::Endpoint;
pub(crate) use error::attempts_text;
pub use error::HttpError;
pub use secret::non_empty_env;
pub use secret::Secret;
pub use settings::{HttpSettings, RetryPolicy};

use classify::{classify_status, classify_transport, read_error_body, retry_after};
use reqwest::{RequestBuilder, Response};
use serde::de::DeserializeOwned;

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
