//! The bearer token: every request carries it (`Authorization: Bearer TOKEN`, or `x-api-key`
//! as LangGraph's clients send an API key), compared in constant time so its bytes cannot be
//! guessed one at a time from response times.

use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The token a request must carry.
#[derive(Clone)]
pub(crate) struct Token(pub Arc<str>);

/// Lets a request through when it carries the token; a 401 otherwise.
pub(crate) async fn require_token(
    State(token): State<Token>,
    request: Request,
    next: Next,
) -> Response {
    if carries(request.headers(), &token.0) {
        return next.run(request).await;
    }
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this server needs its token: send `Authorization: Bearer TOKEN` (or `x-api-key: TOKEN`; \
         langgraph-sdk sends its api_key so)",
    )
    .into_response();
    response.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    response
}

fn carries(headers: &HeaderMap, token: &str) -> bool {
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    // Both are compared, whichever is present, so the time taken does not say which matched.
    let matches = |given: Option<&str>| -> bool {
        given.is_some_and(|g| bool::from(g.trim().as_bytes().ct_eq(token.as_bytes())))
    };
    let by_bearer = matches(bearer);
    let by_key = matches(api_key);
    by_bearer | by_key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_header_carries_the_token() {
        let mut h = HeaderMap::new();
        assert!(!carries(&h, "s3cret"));
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert!(carries(&h, "s3cret"));
        h.insert("authorization", "Bearer s3cre".parse().unwrap());
        assert!(!carries(&h, "s3cret"));
        h.insert("x-api-key", "s3cret".parse().unwrap());
        assert!(carries(&h, "s3cret"));
    }
}
