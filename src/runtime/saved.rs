//! A step that stopped part-way (a task failed or paused) keeps its finished tasks' results as
//! pending writes against the checkpoint before it. Like LangGraph, the thread's newest state
//! and a paused run's result show those results merged (in task order, through the reducers)
//! and list as next only the tasks still to run. The checkpoint itself is not changed: the
//! results merge for real, once, when the step completes.

use super::persist;
use crate::checkpoint::{Frontier, PendingKind, PendingWrite, TaskSpec};
use crate::graph::gotos_of;
use crate::graph::Goto;
use crate::state::{State, TaggedUpdate};

/// The task index of a resume command's write (LangGraph's null task): it belongs to no task.
pub(crate) const COMMAND_TASK: usize = usize::MAX;

/// Adds a resume command's gotos to the step's tasks, after the saved ones (so the indexes of
/// the tasks' saved writes stay valid); a node already next is not added twice.
pub(crate) fn add_command_tasks(frontier: &mut Frontier, goto: &[Goto]) {
    for g in goto {
        let spec = match g {
            Goto::Node(node) => TaskSpec {
                node: node.clone(),
                arg: None,
            },
            Goto::Send(send) => TaskSpec {
                node: send.node.clone(),
                arg: Some(send.arg.clone()),
            },
            Goto::End => continue,
        };
        if spec.arg.is_some() || !frontier.tasks.contains(&spec) {
            frontier.tasks.push(spec);
        }
    }
}

/// What a thread shows at its newest checkpoint: resume commands saved against it applied
/// (their update merged, their gotos next), then the finished tasks' results (below).
pub(crate) fn newest_view<S: State>(
    state: S,
    frontier: &Frontier,
    pending: &[PendingWrite],
) -> (S, Vec<String>) {
    let mut state = state;
    let mut frontier = std::borrow::Cow::Borrowed(frontier);
    for w in pending.iter().filter(|w| w.task == COMMAND_TASK) {
        let PendingKind::Update { update, goto } = &w.kind else {
            continue;
        };
        if let Ok(u) = persist::decode_named::<S::Update>(update.get()) {
            let mut batch = [TaggedUpdate::new(w.node.as_str(), u)];
            if state.apply(&mut batch).is_err() {
                tracing::warn!(
                    "a resume command's update does not merge; showing the state without it"
                );
            }
        }
        add_command_tasks(frontier.to_mut(), &gotos_of(goto));
    }
    match with_saved_results(&state, &frontier, pending) {
        (Some(merged), next) => (merged, next),
        (None, next) => (state, next),
    }
}

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
