//! Forks that carry child namespaces: a fork of a parent paused inside a child, and a fork from
//! a checkpoint inside a child (namespaced time travel).
//!
//! A fork keeps its source checkpoint's id, and a child's namespace is a hash of the parent's
//! checkpoint id and the task ([`task_id`]), so a copied child keeps its name under the new
//! root and the parent's rerun task finds it, exactly as a resume on the source thread would.
//! Child records are copied as stored (a child's state type is not known here): the chain from
//! the wanted checkpoint back to its nearest snapshot, which is all that reading it needs.

use crate::checkpoint::{CheckpointId, CheckpointRecord, Checkpointer, PendingWrite, StateData};
use crate::error::RunError;
use crate::graph::CompiledGraph;
use crate::run::namespace::{task_id, ThreadPath};
use crate::state::State;
use std::sync::Arc;

/// Copies every child that the tasks of `record` (a checkpoint of `src`) started and that has
/// not finished, with its own unfinished children, from `src` to `dst`.
pub(crate) async fn copy_open_children(
    store: &Arc<dyn Checkpointer>,
    src: &ThreadPath,
    record: &CheckpointRecord,
    dst: &ThreadPath,
) -> Result<(), RunError> {
    for (i, task) in record.frontier.tasks.iter().enumerate() {
        for call in 0u32.. {
            let segment = task_id(record.id, i, call);
            let from = src.child(&task.node, &segment);
            let Some(newest) = store.get_checkpoint(&from.to_string(), None).await? else {
                break;
            };
            if newest.frontier.is_done() {
                // A finished child's result is in the parent's writes, or its task runs
                // again from the start in the fork: either way the copy would never be read.
                continue;
            }
            let to = dst.child(&task.node, &segment);
            copy_chain(store, &newest, &to.to_string(), None).await?;
            Box::pin(copy_open_children(store, &from, &newest, &to)).await?;
        }
    }
    Ok(())
}

/// Forks the root thread of `path` into `new_id` as it was when the child `path` ran, with the
/// child (and every level between) at `target`, a checkpoint of `path`.
pub(crate) async fn fork_from_child<S: State>(
    graph: &CompiledGraph<S>,
    store: &Arc<dyn Checkpointer>,
    path: &ThreadPath,
    target: &CheckpointRecord,
    new_id: &str,
) -> Result<(), RunError> {
    // Each level's checkpoint whose step ran the level below, with that task, bottom up.
    let mut levels: Vec<(ThreadPath, CheckpointRecord, usize)> = Vec::new();
    let mut child = path.clone();
    while let Some(parent) = child.parent() {
        let Some(segment) = child.segments().last() else {
            break;
        };
        let (record, task) = step_that_ran(store, &parent, &segment.node, &segment.task).await?;
        levels.push((parent.clone(), record, task));
        child = parent;
    }
    levels.reverse();
    let Some((_, root_record, root_task)) = levels.first() else {
        return Err(RunError::InvalidInput(format!(
            "`{path}` is not a subgraph namespace"
        )));
    };
    graph
        .fork_root(store, root_record, new_id, Some(*root_task))
        .await?;
    let new_root = ThreadPath::root_of(new_id);
    for (level, record, task) in levels.iter().skip(1) {
        let to = new_root
            .with_namespace(&level.namespace())
            .map_err(bad_path)?;
        copy_chain(store, record, &to.to_string(), Some(*task)).await?;
    }
    let to = new_root
        .with_namespace(&path.namespace())
        .map_err(bad_path)?;
    copy_chain(store, target, &to.to_string(), None).await?;
    copy_open_children(store, path, target, &to).await
}

fn bad_path(e: crate::run::namespace::BadPath) -> RunError {
    RunError::InvalidInput(e.to_string())
}

/// The checkpoint of `parent` whose step's task ran node `node` as the child `task`, and that
/// task's position.
async fn step_that_ran(
    store: &Arc<dyn Checkpointer>,
    parent: &ThreadPath,
    node: &str,
    task: &str,
) -> Result<(CheckpointRecord, usize), RunError> {
    let call: u32 = match task.rsplit_once('-') {
        Some((_, n)) => n.parse().unwrap_or(0),
        None => 0,
    };
    let thread = parent.to_string();
    let mut before: Option<CheckpointId> = None;
    loop {
        let page = store.list_checkpoints(&thread, before, 200).await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        for record in page {
            let found = record
                .frontier
                .tasks
                .iter()
                .enumerate()
                .find(|(i, t)| t.node == node && task_id(record.id, *i, call) == task)
                .map(|(i, _)| i);
            if let Some(i) = found {
                return Ok((record, i));
            }
        }
    }
    Err(RunError::InvalidInput(format!(
        "no checkpoint of `{thread}` ran node `{node}` as task `{task}`: the namespace does not \
         belong to this thread (get_state_with_subgraphs lists a thread's children)"
    )))
}

/// Writes `record` and the checkpoints it reads from (back to its nearest snapshot) as thread
/// `to`, with the writes its tasks left (except `skip_task`'s, which reruns in the fork).
async fn copy_chain(
    store: &Arc<dyn Checkpointer>,
    record: &CheckpointRecord,
    to: &str,
    skip_task: Option<usize>,
) -> Result<(), RunError> {
    let mut chain = vec![record.clone()];
    while let StateData::Delta(_) = chain.last().map(|r| &r.state).unwrap_or(&record.state) {
        let Some(parent) = chain.last().and_then(|r| r.parent_id) else {
            break;
        };
        match store
            .get_checkpoint(&record.thread_id, Some(parent))
            .await?
        {
            Some(p) => chain.push(p),
            None => break,
        }
    }
    let count = chain.len();
    for (k, mut r) in chain.into_iter().rev().enumerate() {
        r.thread_id = to.to_string();
        if k == 0 {
            // What came before the oldest copied checkpoint stays in the source thread.
            r.parent_id = None;
        }
        store.put_checkpoint(&r, k + 1 == count).await?;
    }
    let writes: Vec<PendingWrite> = store
        .get_writes(&record.thread_id, record.id)
        .await?
        .into_iter()
        .filter(|w| Some(w.task) != skip_task)
        .collect();
    if !writes.is_empty() {
        store.put_writes(to, record.id, &writes, true).await?;
    }
    Ok(())
}
