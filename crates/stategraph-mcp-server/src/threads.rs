//! Reading a thread and listing the store's threads; and which graph a thread runs with, which
//! a read and a resume both need. A read never writes.

use crate::error::{chain, ToolError};
use crate::reply::{self, Listed, Reply};
use crate::shared::Shared;
use stategraph::runtime::RunError;
use stategraph_checkpoint::{is_root_thread, summarize, validate_thread_id, ThreadStatus};
use stategraph_registry::Resolved;

/// A thread id given by a client, checked.
pub(crate) fn checked_id(thread: &str) -> Result<(), ToolError> {
    validate_thread_id(thread).map_err(|e| ToolError::argument("thread_id", e))
}

/// The graph `thread` runs with: as the store's owner recorded it, else the registered graph
/// its checkpoints name.
pub(crate) async fn graph_of(shared: &Shared, thread: &str) -> Result<Resolved, ToolError> {
    let kept = shared.keeper.graph_of(thread).await.map_err(|e| {
        ToolError::new(format!(
            "thread `{thread}`: {}",
            chain(e.as_ref() as &(dyn std::error::Error + 'static))
        ))
    })?;
    if let Some(resolved) = kept {
        return Ok(resolved);
    }
    let record = shared
        .store
        .get_checkpoint(thread, None)
        .await?
        .ok_or_else(|| not_found(thread))?;
    let name = record.metadata.graph.ok_or_else(|| {
        ToolError::new(format!(
            "thread `{thread}` has no graph name in its checkpoints: cannot tell which graph runs it"
        ))
    })?;
    shared.registry.resolve(&name, &[]).map_err(|e| {
        ToolError::new(format!(
            "thread `{thread}` was run with graph `{name}`: {}",
            chain(&e)
        ))
    })
}

/// No thread of that id.
pub(crate) fn not_found(thread: &str) -> ToolError {
    ToolError::new(format!(
        "no thread `{thread}` in this store (list_threads lists them)"
    ))
}

/// `read_thread`: the thread's newest state and where it stands.
pub(crate) async fn read(shared: &Shared, thread: &str) -> Result<Reply, ToolError> {
    checked_id(thread)?;
    let resolved = graph_of(shared, thread).await?;
    let graph = resolved.build(Some(shared.store.clone()))?;
    let snapshot = match graph.get_state(thread, None).await {
        Ok(s) => s,
        Err(RunError::ThreadNotFound { .. }) => return Err(not_found(thread)),
        Err(e) => return Err(e.into()),
    };
    let mut reply = reply::state(thread, Some(&resolved.file.graph), &snapshot);
    if shared.is_running(thread) {
        reply.structured["status"] = serde_json::json!(ThreadStatus::Running);
        reply.text = format!("A run of this server is on it now.\n{}", reply.text);
    }
    Ok(reply)
}

/// `list_threads`: every root thread of the store, newest first; one that cannot be read is
/// listed as damaged, and the rest still are.
pub(crate) async fn list(shared: &Shared) -> Result<Reply, ToolError> {
    let mut ids = shared.store.list_threads().await?;
    ids.retain(|id| is_root_thread(id));
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        match summarize(shared.store.as_ref(), &id).await {
            Ok(Some(mut summary)) => {
                if shared.is_running(&id) {
                    summary.status = ThreadStatus::Running;
                }
                rows.push(Listed::Summary(summary));
            }
            // Made, not written yet: nothing to show.
            Ok(None) => {}
            Err(e) => rows.push(Listed::Damaged {
                thread_id: id,
                reason: chain(&e),
            }),
        }
    }
    let updated = |row: &Listed| match row {
        Listed::Summary(s) => Some(s.updated_at_ms),
        Listed::Damaged { .. } => None,
    };
    let id = |row: &Listed| match row {
        Listed::Summary(s) => s.thread_id.clone(),
        Listed::Damaged { thread_id, .. } => thread_id.clone(),
    };
    rows.sort_by(|a, b| updated(b).cmp(&updated(a)).then_with(|| id(a).cmp(&id(b))));
    Ok(reply::threads(&rows))
}
