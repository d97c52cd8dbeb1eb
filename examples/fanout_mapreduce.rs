//! Parallel fan-out, a join, and a map-reduce (Send) step.
//!
//! `split` fans out to `count_words` and `count_lines`, which run together in one superstep;
//! `merge` is a join that waits for both. Then a router maps every paragraph to its own
//! `summarise` task (Send), and the results fold back in Send order, whatever order they
//! finish in.
//!
//! Run it with `cargo run --example fanout_mapreduce`.

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{Send, State, StateGraph, END, START};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Report {
    text: String,
    #[state(add)]
    words: usize,
    #[state(add)]
    lines: usize,
    #[state(append)]
    summaries: Vec<String>,
}

fn paragraphs(text: &str) -> Vec<String> {
    text.split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = StateGraph::<Report>::named("report");
    g.add_node("split", |_s: Arc<Report>, _c: Context| async {
        Ok(ReportUpdate::default())
    });
    g.add_node("count_words", |s: Arc<Report>, _c: Context| async move {
        Ok(ReportUpdate::default().words(s.text.split_whitespace().count()))
    });
    g.add_node("count_lines", |s: Arc<Report>, _c: Context| async move {
        Ok(ReportUpdate::default().lines(s.text.lines().count()))
    });
    g.add_node("merge", |s: Arc<Report>, _c: Context| async move {
        println!("join saw {} words on {} lines", s.words, s.lines);
        Ok(ReportUpdate::default())
    });
    g.add_node("summarise", |_s: Arc<Report>, ctx: Context| async move {
        let paragraph: String = ctx.arg()?;
        // Later paragraphs finish first: the merge order still follows Send order.
        let delay = 40u64.saturating_sub(paragraph.len() as u64);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let first = paragraph
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        Ok::<_, NodeError>(
            ReportUpdate::default().summaries(vec![format!("starts with '{first}'")]),
        )
    });
    g.add_edge(START, "split");
    g.add_edge("split", "count_words")
        .add_edge("split", "count_lines");
    g.add_join(["count_words", "count_lines"], "merge");
    g.add_conditional_edges(
        "merge",
        |s: &Report| {
            paragraphs(&s.text)
                .into_iter()
                .map(|p| Send::new("summarise", p))
                .collect::<Vec<_>>()
        },
        ["summarise"],
    )
    .label("one per paragraph");
    g.add_edge("summarise", END);
    let graph = g.compile()?;
    println!("{}", graph.to_dot());

    let text = "Graphs make agents explicit.\n\nCheckpoints make them durable.\nEvery step is saved.\n\nResume never repeats work.";
    let out = graph
        .invoke(ReportUpdate::default().text(text), RunConfig::new())
        .await?;
    println!("words={} lines={}", out.state.words, out.state.lines);
    for (i, s) in out.state.summaries.iter().enumerate() {
        println!("paragraph {}: {s}", i + 1);
    }
    Ok(())
}
