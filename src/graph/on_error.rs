//! Error handlers: the node a run goes to when a node's retries are spent, and the state field
//! the failure is written into. Declared and checked here; the runtime's `runtime/on_error.rs`
//! turns a failed task into that write and that route.

use crate::state::{State, Update};
use serde::{Deserialize, Serialize};

/// A node's error handler: where the run goes when the node fails after its retries, and the
/// state field that receives the [`NodeFailure`]. Set with [`NodeSpec::on_error`](super::NodeSpec::on_error).
///
/// ```
/// use stategraph::graph::{NodeOptions, OnError};
/// let options = NodeOptions {
///     on_error: Some(OnError { handler: "recover".into(), field: "failure".into() }),
///     destinations: vec!["recover".into()],
///     ..NodeOptions::default()
/// };
/// assert_eq!(options.on_error.unwrap().field, "failure");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnError {
    /// The node that handles the failure; its edges, routers or commands decide what follows.
    pub handler: String,
    /// The state field the failure is written into: a `NodeFailure` (or an `Option` of one,
    /// with any reducer), or a list of them with an append reducer.
    pub field: String,
}

/// What a handler is told about a failure, written into the field its node declared.
///
/// ```
/// use stategraph::graph::NodeFailure;
/// let f: NodeFailure = serde_json::from_value(serde_json::json!(
///     {"node": "fetch", "message": "connection refused", "attempts": 3, "step": 2}
/// )).unwrap();
/// assert_eq!(f.attempts, 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFailure {
    /// The node that failed.
    pub node: String,
    /// Its last error.
    pub message: String,
    /// The attempts it made, the first included.
    pub attempts: u32,
    /// The superstep it failed in.
    pub step: u64,
}

/// The update that writes `failure` into `field`: the value itself, or a one-element list for
/// a field that collects failures. `Err` says why neither fits the field.
pub(crate) fn failure_update<S: State>(
    field: &str,
    failure: &NodeFailure,
) -> Result<S::Update, String> {
    let one = serde_json::to_value(failure).map_err(|e| e.to_string())?;
    let as_value = serde_json::json!({ field: one.clone() });
    let first = match serde_json::from_value::<S::Update>(as_value) {
        Ok(update) if !update.is_empty() => return Ok(update),
        Ok(_) => format!("writing it left the update empty (is `{field}` a field of the state?)"),
        Err(e) => e.to_string(),
    };
    let as_list = serde_json::json!({ field: [one] });
    match serde_json::from_value::<S::Update>(as_list) {
        Ok(update) if !update.is_empty() => Ok(update),
        _ => Err(first),
    }
}
