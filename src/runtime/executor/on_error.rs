//! Error handlers at run time: a task whose node declared a handler
//! ([`NodeSpec::on_error`](crate::graph::NodeSpec::on_error)) and failed after its retries does
//! not fail the run. Its failure becomes a write of a [`NodeFailure`] into the declared field,
//! merged at the barrier in task order like any update, and the handler joins the next
//! frontier in place of the failed node's edges. The step's checkpoint holds both, so the
//! handling is a step like any other: a run killed in the handler resumes in the handler.
//!
//! A handled failure in a step that stops anyway (a sibling failed without a handler, or
//! paused) is not saved: the failed task runs again on resume, retries and all, as any task
//! whose result was not saved does.

use super::{Outcome, Run};
use crate::checkpoint::{Frontier, TaskSpec};
use crate::error::NodeError;
use crate::graph::{failure_update, NodeFailure, Topology};
use crate::state::State;

impl<S: State> Run<S> {
    /// Turns the failures of tasks whose node has a handler into handled outcomes.
    pub(super) fn divert_failures(&self, step: u64, outcomes: Vec<Outcome<S>>) -> Vec<Outcome<S>> {
        self.frontier
            .tasks
            .iter()
            .zip(outcomes)
            .map(|(spec, outcome)| match outcome {
                Outcome::Failed { error, attempts } => self.handle(spec, step, error, attempts),
                other => other,
            })
            .collect()
    }

    /// The handled outcome of a failed task, or its failure when its node has no handler.
    fn handle(&self, spec: &TaskSpec, step: u64, error: NodeError, attempts: u32) -> Outcome<S> {
        let topology = &self.graph.topology;
        let Some(on_error) = topology
            .node_index(&spec.node)
            .and_then(|i| topology.builder.nodes[i].options.on_error.as_ref())
        else {
            return Outcome::Failed { error, attempts };
        };
        let failure = NodeFailure {
            node: spec.node.clone(),
            message: error.message().to_string(),
            attempts,
            step,
        };
        // `compile` checked that the field holds a failure; should it not, the run fails as
        // it would without a handler.
        match failure_update::<S>(&on_error.field, &failure) {
            Ok(update) => {
                tracing::info!(node = %spec.node, handler = %on_error.handler, attempts, "node failed; its error handler runs next");
                Outcome::Handled {
                    update,
                    handler: on_error.handler.clone(),
                    error,
                    attempts,
                }
            }
            Err(why) => {
                tracing::warn!(node = %spec.node, field = %on_error.field, why, "failure not handed to the error handler");
                Outcome::Failed { error, attempts }
            }
        }
    }
}

/// Each task's handler when its failure was handled, in task order.
pub(super) fn handlers_of<S: State>(outcomes: &[Outcome<S>]) -> Vec<Option<String>> {
    outcomes
        .iter()
        .map(|o| match o {
            Outcome::Handled { handler, .. } => Some(handler.clone()),
            _ => None,
        })
        .collect()
}

/// Adds the handlers of handled failures to the next frontier: among the triggered nodes, in
/// declaration order (before the Sends), once each, as an edge to them would have.
pub(super) fn add_handlers<S: State>(
    topology: &Topology<S>,
    next: &mut Frontier,
    handlers: &[Option<String>],
) {
    for handler in handlers.iter().flatten() {
        let Some(index) = topology.node_index(handler) else {
            continue;
        };
        let pulled = next.tasks.iter().take_while(|t| t.arg.is_none());
        if pulled.clone().any(|t| t.node == *handler) {
            continue;
        }
        // Triggered nodes come first, in declaration order; the handler goes where its own
        // index puts it.
        let at = pulled
            .take_while(|t| topology.node_index(&t.node).is_some_and(|i| i < index))
            .count();
        next.tasks.insert(
            at,
            TaskSpec {
                node: handler.clone(),
                arg: None,
            },
        );
        next.deferred.retain(|d| d != handler);
    }
}
