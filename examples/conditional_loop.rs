//! A minimal graph with a conditional loop: `draft` writes, `review` scores, and a router sends
//! the run back to `draft` until the score is good enough.
//!
//! Run it with `cargo run --example conditional_loop`.

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Essay {
    /// Every draft so far (append: each node adds to the list).
    #[state(append)]
    drafts: Vec<String>,
    /// The latest review score (overwrite: one writer per step).
    score: u32,
    /// How many revisions were made (add: writes are summed).
    #[state(add)]
    revisions: u32,
}

async fn draft(state: Arc<Essay>, _ctx: Context) -> Result<EssayUpdate, NodeError> {
    let text = format!(
        "draft #{}: {}",
        state.revisions + 1,
        "words ".repeat(state.revisions as usize + 1)
    );
    Ok(EssayUpdate::default().drafts(vec![text]).revisions(1u32))
}

async fn review(state: Arc<Essay>, _ctx: Context) -> Result<EssayUpdate, NodeError> {
    let last = state.drafts.last().map(String::len).unwrap_or(0);
    Ok(EssayUpdate::default().score(last as u32))
}

fn good_enough(state: &Essay) -> &'static str {
    if state.score >= 40 {
        END
    } else {
        "draft"
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut graph = StateGraph::<Essay>::named("essay");
    graph.add_node("draft", draft);
    graph.add_node("review", review);
    graph.add_edge(START, "draft").add_edge("draft", "review");
    graph
        .add_conditional_edges("review", good_enough, ["draft", END])
        .label("score < 40?");
    let graph = graph.compile()?;

    println!("{}", graph.to_mermaid());
    let outcome = graph
        .invoke(EssayUpdate::default(), RunConfig::new())
        .await?;
    for d in &outcome.state.drafts {
        println!("{d}");
    }
    println!(
        "finished after {} supersteps with score {} and {} revisions",
        outcome.step, outcome.state.score, outcome.state.revisions
    );
    Ok(())
}
