//! The functional API: a plain async function whose durable tasks are the workflow.
//!
//! `brief` fetches notes on a topic, drafts one line per note with tasks run together, asks a
//! person to approve, and publishes. Each task's result is saved in the thread's journal as it
//! finishes, so when the function runs again (here: after the person answers; equally after a
//! `kill -9`, with a store on disk) the finished tasks hand back their saved results and only
//! what is left runs. The stream's `task` events show which.
//!
//! ```text
//! cargo run --example functional
//! ```

use futures::StreamExt;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::functional::{entrypoint, FunctionContext, FunctionState, TaskEvent, TASK_EVENT};
use stategraph::runtime::{Event, NodeError, Resume, RunConfig, RunStatus, StreamMode};
use stategraph::CompiledGraph;
use std::sync::Arc;
use std::time::Duration;

/// The function: its input is the topic, its output the published brief.
async fn brief(topic: String, ctx: FunctionContext) -> Result<String, NodeError> {
    let notes: Vec<String> = ctx
        .task("fetch", topic.clone(), |topic: String| async move {
            tokio::time::sleep(Duration::from_millis(50)).await; // an expensive call
            Ok::<_, NodeError>(vec![
                format!("{topic} saves every step"),
                format!("{topic} resumes after a crash"),
            ])
        })
        .await?;
    // Positions are taken when `task` is called, so these keep theirs on every run, whichever
    // finishes first.
    let drafts = notes.into_iter().map(|note| {
        ctx.task("draft", note, |note: String| async move {
            Ok::<_, NodeError>(format!("- {note}."))
        })
    });
    let lines = futures::future::try_join_all(drafts).await?;
    let verdict: String = ctx
        .interrupt(serde_json::json!({ "question": "publish this brief?", "lines": lines }))
        .await?;
    if verdict != "yes" {
        return Ok(format!("not published: {verdict}"));
    }
    let body = lines.join("\n");
    ctx.task(
        "publish",
        (topic, body),
        |(topic, body): (String, String)| async move {
            Ok::<_, NodeError>(format!("# {topic}\n{body}"))
        },
    )
    .await
}

/// Runs (or resumes) the thread, printing each task event as it streams.
async fn run(graph: &CompiledGraph<FunctionState>, resume: Option<Resume>) -> RunStatus {
    let config = RunConfig::new()
        .thread("brief-1")
        .stream_modes([StreamMode::Custom]);
    let mut stream = match resume {
        None => graph.stream(FunctionState::input("durable agents").unwrap(), config),
        Some(answer) => graph.stream_resume("brief-1", answer, config),
    };
    while let Some(event) = stream.next().await {
        if let Event::Custom { kind, payload, .. } = event {
            if kind == TASK_EVENT {
                let task: TaskEvent = serde_json::from_value(payload).unwrap();
                println!("  task {} `{}`: {:?}", task.ordinal, task.name, task.status);
            }
        }
    }
    let outcome = stream.outcome().await.expect("the run failed");
    if let Some(output) = outcome.state.output_as::<String>().unwrap() {
        println!("output:\n{output}");
    }
    outcome.status
}

#[tokio::main]
async fn main() {
    let graph = entrypoint("brief", brief)
        .expect("a valid name")
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));

    println!("first run:");
    let status = run(&graph, None).await;
    let RunStatus::Interrupted { interrupts, .. } = status else {
        panic!("expected a pause for approval");
    };
    println!("paused, asking: {}", interrupts[0].payload);

    println!("resumed with `yes` (fetch and drafts are replayed, not run):");
    run(&graph, Some(Resume::value("yes").unwrap())).await;
}
