//! Your own `graph`-style command for your own graphs: register a factory into the CLI app and
//! get run, resume, threads, state, history, update, fork, rerun, delete, prune, graphs and draw.
//!
//! ```text
//! cargo run --example custom_cli -- run countdown --input 3 --db /tmp/countdown
//! cargo run --example custom_cli -- history <thread> --db /tmp/countdown
//! cargo run --example custom_cli -- draw countdown
//! ```

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_cli::App;
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Countdown {
    /// Where to count down from; `--input 3` sets it (text input is parsed by the node).
    from: String,
    /// The numbers said so far.
    #[state(append)]
    said: Vec<u32>,
}

async fn tick(s: Arc<Countdown>, ctx: Context) -> Result<CountdownUpdate, NodeError> {
    let start: u32 = s
        .from
        .trim()
        .parse()
        .map_err(|e| NodeError::new(format!("`{}` is not a number: {e}", s.from)))?;
    let next = start.saturating_sub(s.said.len() as u32);
    // A setting from the graph file or `--set pause_ms=..`.
    let pause = ctx.setting::<u64>("pause_ms").unwrap_or(0);
    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    Ok(CountdownUpdate::default().said(vec![next]))
}

struct CountdownGraph;

impl GraphFactory for CountdownGraph {
    type State = Countdown;

    fn name(&self) -> &str {
        "countdown"
    }

    fn description(&self) -> &str {
        "Counts down to zero, one checkpoint per number"
    }

    fn graph_file(&self) -> Option<&'static str> {
        // Usually include_str!("../graphs/countdown.toml"); inline here to keep the example whole.
        Some("graph = \"countdown\"\nrecursion_limit = 100\n[settings]\npause_ms = 200\n")
    }

    fn input_field(&self) -> Option<&str> {
        Some("from")
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Countdown>, BuildError> {
        let mut g = StateGraph::<Countdown>::named("countdown");
        g.add_node("tick", tick);
        g.add_edge(START, "tick");
        g.add_conditional_edges(
            "tick",
            |s: &Countdown| {
                if s.said.last() == Some(&0) {
                    END
                } else {
                    "tick"
                }
            },
            ["tick", END],
        )
        .label("zero yet?");
        Ok(g.compile()?)
    }
}

fn main() -> std::process::ExitCode {
    App::new().register(CountdownGraph).run()
}
