//! The research agent, offline: the same graph `graph run research` runs, over a scripted
//! model and a small local corpus, so it needs no key and no network.
//!
//! Run it with `cargo run --example research`. With a real model, build the agent with
//! `stategraph_llm::provider::from_env(..)` instead of the fake one (see `graphs/research.toml`).

use serde_json::json;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Resume, RunConfig};
use stategraph_agents::research::{graph, render, PlanStateUpdate, ResearchAgent};
use stategraph_llm::{ChatModel, FakeChatModel};
use std::sync::Arc;

/// Answers each kind of request the agent makes, the way a real model would in shape.
fn scripted_model() -> FakeChatModel {
    FakeChatModel::from_fn(|req| {
        let user = req
            .messages
            .get(1)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let reply = match req.response_format.as_ref().map(|f| f.name.as_str()) {
            Some("Plan") => json!({"todos": [
                {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []},
                {"id": "t2", "task": "How often does sled flush by default", "kind": "research", "dependencies": ["t1"]}
            ]})
            .to_string(),
            Some("PlanUpdate") => {
                let id = req.response_format.as_ref().map(|f| f.schema["properties"]["completed_task_id"]["enum"][0].clone());
                json!({"completed_task_id": id, "task_outcome": "The sources answer it.", "status": "done", "new_tasks": []}).to_string()
            }
            Some(other) => format!("{{\"error\": \"unexpected schema {other}\"}}"),
            None if user.starts_with("Research question") && user.contains("Findings:") => {
                "sled makes a write durable once its log is flushed to disk with fsync [1], and by default it \
                 flushes every 500 ms [1]; log-structured designs batch writes for the same reason [2]."
                    .to_string()
            }
            None => {
                let task = user.lines().find_map(|l| l.strip_prefix("Task: ")).unwrap_or("the task");
                format!("On \"{task}\": sled's log is flushed with fsync, every 500 ms by default [1].")
            }
        };
        Ok(FakeChatModel::text_reply(reply))
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let corpus = tempfile_dir()?;
    let model: Arc<dyn ChatModel> = Arc::new(scripted_model());
    let agent = ResearchAgent::new(model);
    let research = graph(Arc::new(agent))
        .compile()?
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));

    let config = RunConfig::new()
        .thread("example")
        .recursion_limit(400)
        .setting(
            "search",
            json!({"corpus": corpus.display().to_string(), "max_results": 3}),
        );
    let question = PlanStateUpdate::default().question("How does sled make writes durable?");

    // The run pauses at planning_mode for a person to review the plan...
    let paused = research.invoke(question, config.clone()).await?;
    println!(
        "Paused for review (interrupted: {}):\n\n{}",
        paused.is_interrupted(),
        render(&paused.state.plan)
    );

    // ...who approves it (or resumes with an edited Markdown plan).
    let done = research
        .resume("example", Resume::value("approve")?, config)
        .await?;
    println!(
        "{}\n",
        done.state.answer.as_deref().unwrap_or("(no answer)")
    );
    let total = done.state.usage.total();
    println!(
        "{} model calls, {} tokens",
        total.calls,
        total.usage.total()
    );
    std::fs::remove_dir_all(&corpus)?;
    Ok(())
}

/// A small corpus in a fresh temp folder.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("stategraph-research-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("sled.md"),
        "# sled durability\n\nsled writes to a log; a write is durable once the log is flushed to disk with fsync. \
         By default sled flushes every 500 ms (flush_every_ms).",
    )?;
    std::fs::write(
        dir.join("lsm.md"),
        "# Log-structured storage\n\nLog-structured designs batch writes in memory and flush them sequentially, which makes durable writes cheap.",
    )?;
    Ok(dir)
}
