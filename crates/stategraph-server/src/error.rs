//! Errors as the API says them: a status and a message a person can act on, as JSON
//! (`{"status": 404, "error": "not_found", "message": "..."}`; `detail` repeats the message
//! for LangGraph's clients, which read it there).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use stategraph::checkpoint::CheckpointError;
use stategraph::graph::GraphError;
use stategraph::runtime::RunError;

/// An error answered to a request.
///
/// ```
/// use stategraph_server::ApiError;
/// let e = ApiError::invalid("stream_mode", "unknown mode `tokens`");
/// assert_eq!(e.status.as_u16(), 422);
/// assert_eq!(e.message, "stream_mode: unknown mode `tokens`");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A short machine-readable name (`not_found`, `busy`, `invalid`...).
    pub code: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 404: what was asked for does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: the thread is busy, or the thing exists already.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 422: a field of the request does not fit; the message starts with the field's name.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        let message = match field {
            "" => message.to_string(),
            _ => format!("{field}: {message}"),
        };
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
    }

    /// 422 for something this server does not do (yet), naming the field that asked for it.
    pub fn unsupported(field: &str, what: &str) -> Self {
        Self::invalid(
            field,
            format!("{what} is not supported by this server (see its README)"),
        )
    }

    /// 500: the server or its store failed.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            message.to_string(),
        )
    }

    /// This error with `field: ` before its message, when it is a 422 that does not name one.
    pub(crate) fn in_field(mut self, field: &str) -> Self {
        if self.status == StatusCode::UNPROCESSABLE_ENTITY && !self.message.starts_with(field) {
            self.message = format!("{field}: {}", self.message);
        }
        self
    }

    /// The body answered.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "status": self.status.as_u16(),
            "error": self.code,
            "message": self.message,
            "detail": self.message,
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.to_json())).into_response()
    }
}

impl From<CheckpointError> for ApiError {
    fn from(e: CheckpointError) -> Self {
        match &e {
            CheckpointError::ThreadBusy { .. } | CheckpointError::HolderStopped { .. } => {
                ApiError::new(StatusCode::CONFLICT, "busy", e.to_string())
            }
            CheckpointError::ThreadNotFound { .. } => ApiError::not_found(e.to_string()),
            CheckpointError::ThreadExists { .. } => ApiError::conflict(e.to_string()),
            CheckpointError::InvalidThreadId { .. } => ApiError::invalid("thread_id", e),
            _ => ApiError::internal(e),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Checkpoint(c) => c.into(),
            RunError::ThreadNotFound { .. } | RunError::CheckpointNotFound { .. } => {
                ApiError::not_found(e.to_string())
            }
            RunError::InvalidInput(_) => ApiError::invalid("", e),
            RunError::Resume(_) => ApiError::invalid("command.resume", e),
            RunError::AmbiguousEdit { .. } => ApiError::invalid("as_node", e),
            RunError::Graph(GraphError::UnknownNode { .. }) => ApiError::invalid("", e),
            RunError::Cancelled { .. } => ApiError::conflict(e.to_string()),
            other => ApiError::internal(other),
        }
    }
}

impl From<stategraph_registry::RegistryError> for ApiError {
    fn from(e: stategraph_registry::RegistryError) -> Self {
        // The chain of causes says why a graph cannot be built; the top alone names only it.
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message.push_str(": ");
            message.push_str(&c.to_string());
            cause = c.source();
        }
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "graph_unavailable",
            message,
        )
    }
}
