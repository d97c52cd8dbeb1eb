//! Request bodies and query strings, whose errors name the field that does not fit.

use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// A JSON body decoded into `T`; an empty body reads as `{}` (LangGraph's clients send none
/// for some POSTs). A field that does not fit is a 422 naming it; a body over the limit, a 413.
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    "the request body is over this server's limit (graph serve --body-limit)",
                )
            } else {
                ApiError::invalid("body", r.body_text())
            }
        })?;
        let text: &[u8] = match bytes.iter().all(u8::is_ascii_whitespace) {
            true => b"{}",
            false => &bytes,
        };
        decode(text).map(Body)
    }
}

/// Decodes JSON, naming the field at fault.
pub(crate) fn decode<T: DeserializeOwned>(text: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::invalid("body", format!("not valid JSON: {inner}"));
        }
        let field = if path == "." { "body" } else { path.as_str() };
        ApiError::invalid(field, strip_position(&inner.to_string()))
    })
}

fn strip_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

/// A query string as its pairs, in order (a key may repeat: `stream_mode=values&stream_mode=debug`).
#[derive(Default)]
pub(crate) struct Query(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str::<Vec<(String, String)>>(raw)
            .map(Query)
            .map_err(|e| ApiError::invalid("query", e))
    }
}

impl Query {
    /// The last value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// `key` as a flag: `true`/`1` or `false`/`0` (Python's `True` too); absent is `default`.
    pub fn flag(&self, key: &str, default: bool) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(ApiError::invalid(
                    key,
                    format!("expected true or false, not `{v}`"),
                )),
            },
        }
    }

    /// `key` as a number; absent is `default`.
    pub fn number(&self, key: &str, default: usize) -> Result<usize, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| ApiError::invalid(key, format!("expected a whole number, not `{v}`"))),
        }
    }
}
