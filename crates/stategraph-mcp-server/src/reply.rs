//! What a call answers: how a run ended, a thread's state, a listing, each as structured
//! content (for the program reading it) and in words (for the model or person reading it).

use crate::tools::RESUME_THREAD;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use stategraph::runtime::StateSnapshot;
use stategraph_checkpoint::{InterruptRecord, InterruptWhen, ThreadStatus, ThreadSummary};

/// A successful call's answer.
pub(crate) struct Reply {
    /// The structured content.
    pub structured: Value,
    /// The same in words.
    pub text: String,
}

impl Reply {
    /// The tool result: the words, then the structured content, also as JSON text for clients
    /// that read only text.
    pub fn into_result(self) -> CallToolResult {
        let json = serde_json::to_string_pretty(&self.structured).unwrap_or_default();
        let mut result = CallToolResult::success(vec![
            ContentBlock::text(self.text),
            ContentBlock::text(json),
        ]);
        result.structured_content = Some(self.structured);
        result
    }
}

/// Where a thread stands after a run of this server, or at its newest checkpoint.
pub(crate) struct Standing<'a> {
    pub thread: &'a str,
    /// The registered graph.
    pub graph: &'a str,
    pub status: ThreadStatus,
    pub step: u64,
    pub interrupts: &'a [InterruptRecord],
    /// The graph's result (its output field, else the state) when it is done.
    pub output: Option<Value>,
    /// Why a finished run failed at its job (the graph's verdict).
    pub failure: Option<String>,
}

/// A run that ended done or paused.
pub(crate) fn ended(s: Standing<'_>) -> Reply {
    let questions: Vec<Value> = s.interrupts.iter().map(question).collect();
    let mut structured = json!({
        "thread_id": s.thread,
        "graph": s.graph,
        "status": s.status,
        "step": s.step,
    });
    let mut text = format!(
        "Thread {} (graph {}) is {} after step {}",
        s.thread, s.graph, s.status, s.step
    );
    if s.status == ThreadStatus::Paused {
        text.push_str(", waiting for a person.");
        for (record, q) in s.interrupts.iter().zip(&questions) {
            let asked = match &q["question"] {
                Value::String(words) => words.clone(),
                other => other.to_string(),
            };
            text.push_str(&format!("\n`{}` asks: {asked}", record.node));
        }
        text.push_str(&format!(
            "\nAsk the person, then answer with {RESUME_THREAD} {}.",
            json!({"thread_id": s.thread, "answer": "..."})
        ));
        structured["questions"] = Value::Array(questions);
    } else {
        text.push('.');
    }
    if let Some(failure) = &s.failure {
        text.push_str(&format!(" It finished but failed at its job: {failure}"));
        structured["failed"] = json!(failure);
    }
    if let Some(output) = s.output {
        let shown = match &output {
            Value::String(words) => words.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        text.push_str(&format!("\nResult:\n{shown}"));
        structured["output"] = output;
    }
    Reply { structured, text }
}

/// A question a thread waits on, as a client answers it.
fn question(record: &InterruptRecord) -> Value {
    let asked = match record.when {
        InterruptWhen::Dynamic => match record.payload.get("question") {
            Some(q) => q.clone(),
            None => record.payload.clone(),
        },
        InterruptWhen::Before => json!(format!(
            "paused before `{}` (a breakpoint): resume without an answer to go on",
            record.node
        )),
        InterruptWhen::After => json!(format!(
            "paused after `{}` (a breakpoint): resume without an answer to go on",
            record.node
        )),
    };
    json!({
        "id": record.id,
        "node": record.node,
        "question": asked,
        "payload": record.payload,
    })
}

/// A thread's newest state, with where it stands.
pub(crate) fn state(thread: &str, graph: Option<&str>, snapshot: &StateSnapshot<Value>) -> Reply {
    let status = status_of(snapshot);
    let mut reply = ended(Standing {
        thread,
        graph: graph.unwrap_or("?"),
        status,
        step: snapshot.step,
        interrupts: &snapshot.interrupts,
        output: None,
        failure: None,
    });
    reply.structured["values"] = snapshot.values.clone();
    reply.structured["next"] = json!(snapshot.next);
    reply.structured["checkpoint_id"] = json!(snapshot.checkpoint_id.to_string());
    if !snapshot.errors.is_empty() {
        reply.structured["errors"] = json!(snapshot.errors);
        for e in &snapshot.errors {
            reply
                .text
                .push_str(&format!("\n`{}` failed: {}", e.node, e.message));
        }
        reply.text.push_str(&format!(
            "\n{RESUME_THREAD} without an answer runs the failed tasks again."
        ));
    }
    if !snapshot.next.is_empty() && status != ThreadStatus::Paused {
        reply
            .text
            .push_str(&format!("\nNext: {}.", snapshot.next.join(", ")));
    }
    let values = serde_json::to_string_pretty(&snapshot.values).unwrap_or_default();
    reply.text.push_str(&format!("\nState:\n{values}"));
    reply
}

/// Where a thread stands at a checkpoint, from what the checkpoint says comes next.
pub(crate) fn status_of(snapshot: &StateSnapshot<Value>) -> ThreadStatus {
    if !snapshot.errors.is_empty() {
        ThreadStatus::Failed
    } else if !snapshot.interrupts.is_empty() {
        ThreadStatus::Paused
    } else if snapshot.next.is_empty() {
        ThreadStatus::Done
    } else {
        ThreadStatus::Stopped
    }
}

/// A thread as a listing shows it: its summary, or why it cannot be read.
pub(crate) enum Listed {
    Summary(ThreadSummary),
    Damaged { thread_id: String, reason: String },
}

/// The store's threads, newest first.
pub(crate) fn threads(rows: &[Listed]) -> Reply {
    let mut text = match rows.len() {
        0 => "No threads yet: start one with a run_<graph> tool.".to_string(),
        1 => "1 thread:".to_string(),
        n => format!("{n} threads, newest first:"),
    };
    let mut listed = Vec::with_capacity(rows.len());
    for row in rows {
        match row {
            Listed::Summary(s) => {
                let failed = s.verdict.as_ref().and_then(|v| v.failure.clone());
                let status = match failed {
                    Some(_) => "done (failed)".to_string(),
                    None => s.status.to_string(),
                };
                let graph = s.graph.as_deref().unwrap_or("?");
                text.push_str(&format!(
                    "\n{}  {graph}  {status}  step {}",
                    s.thread_id, s.step
                ));
                listed.push(json!({
                    "thread_id": s.thread_id,
                    "graph": s.graph,
                    "status": s.status,
                    "failed": failed,
                    "step": s.step,
                    "updated_at_ms": s.updated_at_ms,
                }));
            }
            Listed::Damaged { thread_id, reason } => {
                text.push_str(&format!("\n{thread_id}  damaged: {reason}"));
                listed.push(json!({"thread_id": thread_id, "status": "damaged", "damage": reason}));
            }
        }
    }
    Reply {
        structured: json!({ "threads": listed }),
        text,
    }
}
