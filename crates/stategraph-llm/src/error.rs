use super::http::{attempts_text, HttpError};
use super::Usage;

/// Why a model call failed. Messages name the provider, base URL and model where they
/// matter, and never contain an API key.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LlmError {
    /// No provider could be chosen from settings and environment; the message lists the
    /// environment variables to set.
    #[error("{0}")]
    NotConfigured(String),
    /// The settings are invalid (unknown provider name, bad base URL, ...).
    #[error("invalid model settings: {0}")]
    Config(String),
    /// The HTTP exchange failed (auth, rate limit, server error, timeout, bad JSON, ...).
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The response was JSON but not a usable reply (no choices, no content blocks, ...).
    #[error("{provider} sent a reply that cannot be used: {detail}")]
    MalformedResponse {
        /// Who sent it.
        provider: String,
        /// What was wrong.
        detail: String,
    },
    /// The provider reported an error inside a successful response or mid-stream.
    #[error("{provider} reported an error ({kind}): {message}")]
    Provider {
        /// Who reported it.
        provider: String,
        /// The provider's error type, e.g. `overloaded_error`.
        kind: String,
        /// The provider's message.
        message: String,
        /// Whether sending the request again may succeed.
        transient: bool,
    },
    /// A streamed reply broke off before it was complete.
    #[error("the streamed reply from {provider} broke off: {detail}")]
    Stream {
        /// Who was streaming.
        provider: String,
        /// What happened.
        detail: String,
    },
    /// The model did not produce a reply matching the schema, even after retries.
    #[error(
        "the model's reply did not match `{name}` after {}: {error}. Last reply: {last_reply}",
        attempts_text(*attempts)
    )]
    Structured {
        /// The schema's name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The last parse or validation error.
        error: String,
        /// The last reply, verbatim.
        last_reply: String,
        /// What the attempts used: each was answered, so each is billed.
        usage: Usage,
    },
    /// A [`FakeChatModel`](super::FakeChatModel) ran out of script, or was scripted to fail
    /// this way.
    #[error("fake model: {0}")]
    Fake(String),
    /// A request failed after earlier requests of the same call were answered: a structured
    /// reply asked for again hit an HTTP error or a broken stream. Says what went wrong like
    /// `error` does (its [`is_transient`](Self::is_transient) and the rest are `error`'s), and
    /// keeps what the answered requests used, since they were billed. [`cause`](Self::cause)
    /// is the error itself, for matching on its kind.
    #[error("{error}")]
    AfterAnswers {
        /// Why the last request failed.
        error: Box<LlmError>,
        /// What the requests answered before it used.
        usage: Usage,
    },
}

impl LlmError {
    /// True when the same call may succeed if tried again later: rate limits, server
    /// errors, timeouts, connection failures, broken streams and overload errors. The graph
    /// engine's retry policy uses this.
    ///
    /// ```
    /// use stategraph_llm::LlmError;
    /// assert!(!LlmError::NotConfigured("set a key".into()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self.cause() {
            LlmError::Http(e) => e.is_transient(),
            LlmError::Stream { .. } => true,
            LlmError::Provider { transient, .. } => *transient,
            _ => false,
        }
    }

    /// True when the caller (a node's retry policy) should send the call again: the failure
    /// is transient and no layer below has retried it. The HTTP client already retried an
    /// HTTP error (429, 5xx, timeouts, dropped connections, honouring `Retry-After`), so
    /// retrying it again would multiply the attempts and the wait; a reply that broke off
    /// mid-stream, or an overload the provider reported inside a reply, it could not retry.
    ///
    /// ```
    /// use stategraph_llm::LlmError;
    /// let broke = LlmError::Stream { provider: "p".into(), detail: "reset".into() };
    /// assert!(broke.should_retry());
    /// ```
    pub fn should_retry(&self) -> bool {
        !matches!(self.cause(), LlmError::Http(_)) && self.is_transient()
    }

    /// The error itself, without what requests answered before it used: `self`, unless it
    /// is [`LlmError::AfterAnswers`].
    ///
    /// ```
    /// use stategraph_llm::{LlmError, Usage};
    /// let e = LlmError::Fake("reset".into()).after_answers(Usage::new(10, 2));
    /// assert!(matches!(e.cause(), LlmError::Fake(_)));
    /// assert_eq!(e.usage().map(|u| u.requests), Some(1));
    /// ```
    pub fn cause(&self) -> &LlmError {
        match self {
            LlmError::AfterAnswers { error, .. } => error.cause(),
            other => other,
        }
    }

    /// This error, keeping `usage` (what requests of the same call answered before it used)
    /// when there is any: [`LlmError::AfterAnswers`], or `self` when nothing was answered.
    pub fn after_answers(self, usage: Usage) -> LlmError {
        if usage.is_empty() {
            return self;
        }
        match self {
            LlmError::AfterAnswers {
                error,
                usage: before,
            } => LlmError::AfterAnswers {
                error,
                usage: usage + before,
            },
            error => LlmError::AfterAnswers {
                error: Box::new(error),
                usage,
            },
        }
    }

    /// What the requests behind this error used, when they were answered and so billed: the
    /// attempts of a structured reply that never fitted, or the attempts answered before a
    /// later one failed ([`LlmError::AfterAnswers`]). `None` for errors where no reply came
    /// back (the HTTP client's retries of refused requests cost nothing).
    ///
    /// ```
    /// use stategraph_llm::{LlmError, Usage};
    /// let e = LlmError::Structured {
    ///     name: "Plan".into(),
    ///     attempts: 2,
    ///     error: "not JSON".into(),
    ///     last_reply: "hm".into(),
    ///     usage: Usage::new(10, 2) + Usage::new(14, 2),
    /// };
    /// assert_eq!(e.usage().map(|u| u.requests), Some(2));
    /// ```
    pub fn usage(&self) -> Option<Usage> {
        match self {
            LlmError::Structured { usage, .. } => Some(*usage),
            LlmError::AfterAnswers { error, usage } => {
                Some(*usage + error.usage().unwrap_or_default())
            }
            _ => None,
        }
    }

    /// True when the error is about the model's reply (it did not fit the schema, or had
    /// nothing usable), rather than about reaching the model.
    pub fn is_about_the_reply(&self) -> bool {
        matches!(
            self.cause(),
            LlmError::Structured { .. } | LlmError::MalformedResponse { .. }
        )
    }
}
