//! A step that stopped part-way (a task failed or paused) keeps its finished tasks' results as
//! pending writes against the checkpoint before it. Like LangGraph, the thread's newest state
//! and a paused run's result show those results merged (in task order, through the reducers)
//! and list as next only the tasks still to run. The checkpoint itself is not changed: the
//! results merge for real, once, when the step completes.

use super::persist;
use crate::checkpoint::{Frontier, PendingKind, PendingWrite};
use crate::state::{State, TaggedUpdate};

/// `state` with the saved results of `frontier`'s finished tasks merged, and the tasks still to
/// run. When the results cannot be decoded or merged, the checkpoint's own state is shown (the
/// step reports the problem when it completes) and every task stays next.
pub(crate) fn with_saved_results<S: State>(
    state: &S,
    frontier: &Frontier,
    pending: &[PendingWrite],
) -> (Option<S>, Vec<String>) {
    let mut done: Vec<(usize, &PendingWrite)> = pending
        .iter()
        .filter(|w| matches!(w.kind, PendingKind::Update { .. }))
        .filter(|w| frontier.tasks.get(w.task).is_some_and(|t| t.node == w.node))
        .map(|w| (w.task, w))
        .collect();
    done.sort_by_key(|(task, _)| *task);
    done.dedup_by_key(|(task, _)| *task);
    let all = frontier.next_nodes();
    if done.is_empty() {
        return (None, all);
    }
    let mut batch = Vec::with_capacity(done.len());
    for (_, w) in &done {
        let PendingKind::Update { update, .. } = &w.kind else {
            continue;
        };
        match persist::decode_named::<S::Update>(update.get()) {
            Ok(u) => batch.push(TaggedUpdate::new(w.node.as_str(), u)),
            Err(message) => {
                tracing::warn!(node = %w.node, %message, "a saved result does not decode; showing the state without it");
                return (None, all);
            }
        }
    }
    let mut merged = state.clone();
    if let Err(e) = merged.apply(&mut batch) {
        tracing::warn!(error = %e, "saved results do not merge; showing the state without them");
        return (None, all);
    }
    let next = frontier
        .tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| !done.iter().any(|(task, _)| task == i))
        .map(|(_, t)| t.node.clone())
        .collect();
    (Some(merged), next)
}
