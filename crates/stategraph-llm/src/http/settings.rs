//! Timeouts and the retry policy of a client.

use rand::Rng;
use std::time::Duration;

#[cfg(doc)]
use super::{HttpClient, HttpError};

/// When and how often to retry. Retries happen on 429, 5xx, timeouts and connections that
/// broke or could not be made; never on a refused connection (nothing listens there).
///
/// This is the one layer that retries a request: an [`HttpError`] coming out of
/// [`HttpClient::send`] has had its retries, so callers (a node's retry policy) should not
/// send the call again (see [`LlmError::should_retry`](crate::LlmError::should_retry)).
///
/// ```
/// use std::time::Duration;
/// use stategraph_llm::http::RetryPolicy;
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
}
