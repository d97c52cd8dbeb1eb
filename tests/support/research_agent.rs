//! Shared by the `research_*` tests: a small corpus in a temp folder and a fake model that
//! answers each kind of request the research agent makes (plan, summary, review, split,
//! answer), recording every request. Included with `#[path]`; it has no tests of its own.
#![allow(dead_code)]

use serde_json::{json, Value};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::RunConfig;
use stategraph::CompiledGraph;
use stategraph_agents::research::{graph, PlanState, ResearchAgent};
use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel};
use std::sync::Arc;

/// A folder of three small documents.
pub fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let docs = [
        ("sled.md", "# Sled durability\n\nsled is an embedded database written in Rust. Writes become durable when the log is flushed to disk with fsync; flush_every_ms flushes every 500 ms by default."),
        ("tokio.md", "# Tokio runtime\n\nTokio is an asynchronous runtime for Rust with a work-stealing scheduler and timers."),
        ("lsm.md", "# Log-structured storage\n\nLog-structured merge trees batch writes in memory and write sorted runs; compaction merges runs in the background."),
    ];
    for (name, text) in docs {
        std::fs::write(dir.path().join(name), text).expect("write doc");
    }
    dir
}

/// What the fake model says in a review of todo `id` (with its attempt count so far).
pub type Verdict = Arc<dyn Fn(&str) -> Value + Send + Sync>;

/// The kind of a request, by its schema name or its system prompt.
pub fn kind_of(req: &ChatRequest) -> String {
    if let Some(format) = &req.response_format {
        return format.name.clone();
    }
    let system = req
        .messages
        .first()
        .map(|m| m.content.as_str())
        .unwrap_or("");
    if system.starts_with("Write the final answer") {
        "Answer".into()
    } else {
        "Summary".into()
    }
}

/// The `Task:` line of a summary request.
pub fn task_of(req: &ChatRequest) -> Option<String> {
    let user = req.messages.get(1)?;
    user.content
        .lines()
        .find_map(|l| l.strip_prefix("Task: ").map(str::to_string))
}

/// The todo a review request is about (the only id its schema allows).
pub fn reviewed_id(req: &ChatRequest) -> Option<String> {
    let schema = &req.response_format.as_ref()?.schema;
    schema["properties"]["completed_task_id"]["enum"][0]
        .as_str()
        .map(str::to_string)
}

/// The first `[n]` in the sources of a request.
fn first_source(req: &ChatRequest) -> usize {
    let text = req
        .messages
        .get(1)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    text.split("Sources:")
        .nth(1)
        .and_then(|s| {
            let open = s.find('[')?;
            let close = s[open..].find(']')? + open;
            s[open + 1..close].parse().ok()
        })
        .unwrap_or(1)
}

/// A fake model: `plan` for the plan, `verdict(id)` for each review, a summary citing the
/// first source, two sub-tasks for a split, and an answer citing [1] and [2].
pub fn model(plan: Value, verdict: Verdict) -> Arc<FakeChatModel> {
    Arc::new(FakeChatModel::from_fn(move |req| {
        let reply = match kind_of(req).as_str() {
            "Plan" => plan.to_string(),
            "PlanUpdate" => {
                let id = reviewed_id(req).unwrap_or_default();
                let mut v = verdict(&id);
                if v.get("completed_task_id").is_none() {
                    v["completed_task_id"] = json!(id);
                }
                v.to_string()
            }
            "Split" => json!({"sub_tasks": [
                {"task": "find the flush interval", "kind": "research"},
                {"task": "find what fsync does", "kind": "research"}
            ]})
            .to_string(),
            "Answer" => {
                "Sled makes writes durable by flushing its log [1]; Tokio is an async runtime [2]."
                    .to_string()
            }
            _ => format!(
                "The sources say: {} [{}].",
                task_of(req).unwrap_or_default(),
                first_source(req)
            ),
        };
        Ok(FakeChatModel::text_reply(reply))
    }))
}

/// A review saying done, with no follow-ups.
pub fn done() -> Value {
    json!({"task_outcome": "answered", "status": "done", "new_tasks": []})
}

/// A review saying failed.
pub fn failed() -> Value {
    json!({"task_outcome": "the sources do not answer it", "status": "failed", "new_tasks": []})
}

/// A three-todo plan: t1, t2, and t3 after t1.
pub fn three_todos() -> Value {
    json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []},
        {"id": "t2", "task": "What is the Tokio runtime", "kind": "research", "dependencies": []},
        {"id": "t3", "task": "How do log-structured merge trees compact", "kind": "research", "dependencies": ["t1"]}
    ]})
}

/// The research graph over `model`, with an in-memory checkpointer.
pub fn compiled(model: Arc<FakeChatModel>) -> CompiledGraph<PlanState> {
    let model: Arc<dyn ChatModel> = model;
    graph(Arc::new(ResearchAgent::new(model)))
        .compile()
        .expect("graph compiles")
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

/// Settings searching `corpus`, with a thread id.
pub fn config(corpus: &std::path::Path, thread: &str) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .recursion_limit(200)
        .setting(
            "search",
            json!({"corpus": corpus.display().to_string(), "max_results": 2}),
        )
}

/// The tasks the model was asked to summarise, in order.
pub fn summarised_tasks(model: &FakeChatModel) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter(|r| kind_of(r) == "Summary")
        .filter_map(task_of)
        .collect()
}
