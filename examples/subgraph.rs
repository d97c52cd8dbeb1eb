//! A parent that runs a child graph per item with `Send`, each child pausing for a person, and
//! the run watched through stream modes.
//!
//! The child (`review`) drafts a one-line summary of its item and asks a person to approve it.
//! Its steps are checkpointed in the parent's thread under the namespace `review:{task}`, so
//! both children pause the whole run together; the example answers them by id, the way a UI
//! would, and streams `updates` (with each event's namespace) while the run continues.
//!
//! ```text
//! cargo run --example subgraph
//! ```

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{
    Context, Event, NodeError, Resume, RunConfig, RunStatus, StreamMode, Subgraph,
};
use stategraph::{Send, State, StateGraph, END, START};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The parent's state: the items to review, and what came back.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Batch {
    items: Vec<String>,
    #[state(append)]
    approved: Vec<String>,
}

/// One child's state: its item, a draft, and the person's verdict.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Review {
    item: String,
    draft: String,
    verdict: String,
}

fn review_graph() -> stategraph::CompiledGraph<Review> {
    let mut g = StateGraph::<Review>::named("review");
    g.add_node("draft", |s: Arc<Review>, _c: Context| async move {
        Ok::<_, NodeError>(ReviewUpdate::default().draft(format!("{}: looks fine", s.item)))
    });
    g.add_node("ask", |s: Arc<Review>, ctx: Context| async move {
        // The run pauses here; on resume this node runs again and gets the answer.
        let verdict: String = ctx
            .interrupt(serde_json::json!({"approve?": s.draft}))
            .await?;
        Ok::<_, NodeError>(ReviewUpdate::default().verdict(verdict))
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "ask")
        .add_edge("ask", END);
    g.compile().expect("the review graph is valid")
}

fn batch_graph() -> stategraph::CompiledGraph<Batch> {
    let review = Subgraph::new(
        review_graph(),
        |_b: &Batch, ctx: &Context| Ok(ReviewUpdate::default().item(ctx.arg::<String>()?)),
        |_b: &Batch, r: Review| {
            BatchUpdate::default().approved(vec![format!("{} ({})", r.item, r.verdict)])
        },
    );
    let mut g = StateGraph::<Batch>::named("batch");
    g.add_node("review", review);
    g.add_conditional_edges(
        START,
        |b: &Batch| {
            b.items
                .iter()
                .map(|i| Send::new("review", i))
                .collect::<Vec<_>>()
        },
        ["review"],
    );
    g.add_edge("review", END);
    g.compile().expect("the batch graph is valid")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let graph = batch_graph().with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let input = BatchUpdate::default().items(vec!["invoice-17".into(), "invoice-18".into()]);
    let out = graph
        .invoke(input, RunConfig::new().thread("batch-1"))
        .await?;
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        return Err("expected the reviews to wait for a person".into());
    };
    println!("paused; waiting for {} answers:", interrupts.len());
    for i in interrupts {
        println!(
            "  {} in {} (node {}): {}",
            i.id, i.namespace, i.node, i.payload
        );
    }

    // Each child's own state, nested under the task that runs it (LangGraph's
    // `get_state(config, subgraphs=True)`); its `thread` addresses the child for history,
    // edits (`update_subgraph_state`) and forks.
    let state = graph.get_state_with_subgraphs("batch-1", None).await?;
    for child in &state.subgraphs {
        println!(
            "  child {} waits at {:?} with draft {}",
            child.thread, child.state.next, child.state.values["draft"]
        );
    }

    // A person approves both; the run resumes inside each child, streaming its updates.
    let answers: BTreeMap<String, serde_json::Value> = interrupts
        .iter()
        .map(|i| (i.id.clone(), serde_json::json!("approved")))
        .collect();
    let config = RunConfig::new().stream_modes([StreamMode::Updates]);
    let mut run = graph.stream_resume("batch-1", Resume::ById(answers), config);
    while let Some(event) = run.next().await {
        if let Event::Updates {
            namespace,
            node,
            update,
            ..
        } = event
        {
            let at = if namespace.is_empty() {
                "batch".to_string()
            } else {
                namespace
            };
            println!("update from {node} in {at}: {update}");
        }
    }
    let done = run.outcome().await?;
    println!("done: {:?}", done.state.approved);
    Ok(())
}
