//! A failed model call as a node error, written once for every agent: whether the node's retry
//! policy may send the call again, and what the message says.

use stategraph::runtime::NodeError;
use stategraph_llm::LlmError;

/// A model error as a node error, retryable only when no lower layer retried it already (the
/// HTTP client retries its own errors), so retries never multiply across layers.
///
/// ```
/// use stategraph_llm::LlmError;
/// let e = stategraph_prebuilt::model_node_error(LlmError::NotConfigured("set a key".into()));
/// assert!(!e.is_transient());
/// assert!(e.message().starts_with("the model call failed: "));
/// ```
pub fn model_node_error(e: LlmError) -> NodeError {
    node_error(format!("the model call failed: {e}"), &e)
}

/// A model error of a call that asked for `asked` (e.g. "decomposing tasks/a.md") as a node
/// error: a reply that did not fit says what was asked for, a model that could not be reached
/// says only that. Retryable as [`model_node_error`] is.
///
/// ```
/// use stategraph_llm::LlmError;
/// let broke = LlmError::Stream { provider: "p".into(), detail: "reset".into() };
/// let e = stategraph_prebuilt::asked_node_error("planning", broke);
/// assert!(e.is_transient());
/// assert!(!e.message().starts_with("planning"));
/// ```
pub fn asked_node_error(asked: &str, e: LlmError) -> NodeError {
    let message = match e.is_about_the_reply() {
        true => format!("{asked}: {e}"),
        false => e.to_string(),
    };
    node_error(message, &e)
}

fn node_error(message: String, e: &LlmError) -> NodeError {
    if e.should_retry() {
        NodeError::transient(message)
    } else {
        NodeError::new(message)
    }
}
