//! Turning what a server or the transport did into an [`HttpError`]: status codes, transport
//! errors, `Retry-After`, and bodies quoted back (shortened and redacted).

use super::{Endpoint, HttpError, Secret};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// How many characters of a server's error body are kept in an error message.
const BODY_EXCERPT_CHARS: usize = 600;

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
pub(super) async fn read_error_body(mut response: Response) -> String {
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
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
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

pub(super) fn classify_status(
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

pub(super) fn classify_transport(
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
    use reqwest::header::HeaderValue;

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
