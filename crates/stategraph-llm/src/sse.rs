//! Server-sent events from a streaming model response, shared by both providers.

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::Response;

use super::http::{body_error, Endpoint, HttpError, Secret};
use super::LlmError;

/// What the event handler wants next.
pub(crate) enum Flow {
    Continue,
    /// The provider signalled the end (`[DONE]`, `message_stop`).
    Done,
}

/// Whether the server answered a streaming request with an event stream. Some
/// OpenAI-compatible servers ignore `stream: true` and send one JSON body instead.
pub(crate) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// Feeds each event of `response` to `handle` until it returns [`Flow::Done`] or the stream
/// ends. Returns whether the end was signalled (a stream that just stops is cut short).
pub(crate) async fn for_each_event<F>(
    response: Response,
    endpoint: &Endpoint,
    secret: Option<&Secret>,
    mut handle: F,
) -> Result<bool, LlmError>
where
    F: FnMut(Event) -> Result<Flow, LlmError>,
{
    let mut events = response.bytes_stream().eventsource();
    while let Some(item) = events.next().await {
        let event = match item {
            Ok(event) => event,
            Err(EventStreamError::Transport(e)) => {
                let detail = match body_error(endpoint, &e, secret) {
                    HttpError::Timeout { detail, .. } => format!("read timed out ({detail})"),
                    other => other.to_string(),
                };
                return Err(LlmError::Stream {
                    provider: endpoint.provider.clone(),
                    detail,
                });
            }
            Err(e) => {
                return Err(LlmError::MalformedResponse {
                    provider: endpoint.provider.clone(),
                    detail: format!("invalid event stream: {e}"),
                })
            }
        };
        if let Flow::Done = handle(event)? {
            return Ok(true);
        }
    }
    Ok(false)
}
