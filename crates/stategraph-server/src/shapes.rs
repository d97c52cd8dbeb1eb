//! Engine types in the JSON shapes of LangGraph that several routes share: checkpoints,
//! interrupts, a thread's state, times. (A thread, a run and an assistant are shaped where
//! they are answered; a stream's events in `sse.rs`.)

use serde_json::{json, Map, Value};
use stategraph::checkpoint::{CheckpointId, InterruptRecord};
use stategraph::runtime::{StateSnapshot, ThreadPath};

/// A time as ISO 8601 in UTC with milliseconds (`2026-01-02T03:04:05.678Z`).
pub(crate) fn iso(ms: u64) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        // Past the year 9999: no ISO 8601 date, and no client would read one.
        .unwrap_or_else(|| "9999-12-31T23:59:59.999Z".to_string())
}

/// A checkpoint as LangGraph names one: thread, namespace, id.
pub(crate) fn checkpoint(thread: &str, id: Option<CheckpointId>) -> Value {
    let (root, ns) = split_thread(thread);
    json!({
        "thread_id": root,
        "checkpoint_ns": ns,
        "checkpoint_id": id.map(|c| c.to_string()),
        "checkpoint_map": null,
    })
}

/// A thread id split into its root and its subgraph namespace (`""` for the root), with
/// LangGraph's `|` between levels.
pub(crate) fn split_thread(thread: &str) -> (String, String) {
    match thread.parse::<ThreadPath>() {
        Ok(path) if !ThreadPath::is_root_id(thread) => {
            (path.root().to_string(), path.namespace().replace('/', "|"))
        }
        _ => (thread.to_string(), String::new()),
    }
}

/// An interrupt as LangGraph's clients read it: the value shown and the id answers go to.
pub(crate) fn interrupt(record: &InterruptRecord) -> Value {
    json!({ "value": record.payload, "id": record.id })
}

pub(crate) fn interrupts(records: &[InterruptRecord]) -> Value {
    Value::Array(records.iter().map(interrupt).collect())
}

/// The id of the `index`th task of the step after `checkpoint`.
pub(crate) fn task_id(checkpoint: CheckpointId, index: usize) -> String {
    format!("{checkpoint}:{index}")
}

/// A checkpoint's metadata: ours (source, writers, run, schema version), with LangGraph's
/// `step` and `graph_id` beside them.
fn metadata(snapshot: &StateSnapshot<Value>) -> Value {
    let mut m = match serde_json::to_value(&snapshot.metadata) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    m.insert("step".into(), json!(snapshot.step));
    if let Some(graph) = &snapshot.metadata.graph {
        m.insert("graph_id".into(), json!(graph));
    }
    Value::Object(m)
}

/// A thread's state at a checkpoint (LangGraph's `ThreadState`): values, what runs next and
/// why it waits, the checkpoint and its parent. With subgraphs, a task that runs a child graph
/// carries the child's state.
pub(crate) fn thread_state(thread: &str, s: &StateSnapshot<Value>) -> Value {
    let tasks: Vec<Value> = s
        .next
        .iter()
        .enumerate()
        .map(|(index, node)| task(s, index, node))
        .collect();
    json!({
        "values": s.values,
        "next": s.next,
        "tasks": tasks,
        "checkpoint": checkpoint(thread, Some(s.checkpoint_id)),
        "metadata": metadata(s),
        "created_at": iso(s.metadata.created_at_ms),
        "parent_checkpoint": s.parent_id.map(|p| checkpoint(thread, Some(p))),
        "interrupts": interrupts(&s.interrupts),
    })
}

/// One task of the step after `s`: its interrupts (the root graph's own, by node), its error,
/// and a child graph's state when `s` carries its subgraphs.
fn task(s: &StateSnapshot<Value>, index: usize, node: &str) -> Value {
    let waits: Vec<&InterruptRecord> = s
        .interrupts
        .iter()
        .filter(|i| i.node == node && i.namespace.is_empty())
        .collect();
    let error = s
        .errors
        .iter()
        .find(|e| e.node == node)
        .map(|e| e.message.clone());
    let child = s
        .subgraphs
        .iter()
        .find(|c| c.node == node)
        .map(|c| thread_state(&c.thread, &c.state));
    json!({
        "id": task_id(s.checkpoint_id, index),
        "name": node,
        "error": error,
        "interrupts": waits.iter().map(|i| interrupt(i)).collect::<Vec<_>>(),
        "checkpoint": null,
        "state": child,
    })
}

/// The state of a thread with no checkpoint yet (made, never run).
pub(crate) fn empty_state(thread: &str) -> Value {
    json!({
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": checkpoint(thread, None),
        "metadata": {},
        "created_at": null,
        "parent_checkpoint": null,
        "interrupts": [],
    })
}

/// A thread's pending interrupts by task id, as a thread's `interrupts` field holds them.
pub(crate) fn interrupts_by_task(s: &StateSnapshot<Value>) -> Value {
    let mut by_task = Map::new();
    for (index, node) in s.next.iter().enumerate() {
        let waits: Vec<Value> = s
            .interrupts
            .iter()
            .filter(|i| &i.node == node && i.namespace.is_empty())
            .map(interrupt)
            .collect();
        if !waits.is_empty() {
            by_task.insert(task_id(s.checkpoint_id, index), Value::Array(waits));
        }
    }
    let nested: Vec<Value> = s
        .interrupts
        .iter()
        .filter(|i| !i.namespace.is_empty())
        .map(interrupt)
        .collect();
    if !nested.is_empty() {
        by_task.insert("subgraphs".into(), Value::Array(nested));
    }
    Value::Object(by_task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso_8601_utc() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_795_350_896_789), "2026-11-22T12:34:56.789Z");
    }

    #[test]
    fn a_child_thread_splits_into_root_and_namespace() {
        let (root, ns) = split_thread("t1/review:0a1b2c3d");
        assert_eq!((root.as_str(), ns.as_str()), ("t1", "review:0a1b2c3d"));
        assert_eq!(split_thread("t1"), ("t1".to_string(), String::new()));
    }
}
