//! The shared workloads' graphs (`../shared/bench/WORKLOADS.md`): a chain of nodes that each
//! add one, and the fan-out. `benches/workloads.rs` runs them directly; `workload_factories.rs`
//! registers them as a binary would. Include with `#[path]`.

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Count {
    pub count: i64,
}

/// `nodes` nodes n0.. in a line, each returning `count + 1`, named `name`.
pub fn chain(name: &str, nodes: usize) -> StateGraph<Count> {
    let mut g = StateGraph::<Count>::named(name);
    for i in 0..nodes {
        g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
            Ok::<_, NodeError>(CountUpdate::default().count(s.count + 1))
        });
        if i > 0 {
            g.add_edge(format!("n{}", i - 1), format!("n{i}"));
        }
    }
    let last = format!("n{}", nodes.saturating_sub(1));
    g.add_edge(START, "n0").add_edge(last.as_str(), END);
    g
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fan {
    #[state(append)]
    pub results: Vec<i64>,
}

/// `fanout`: `split`, ten workers w0..w9 in one superstep (wi appends i), a `join` that waits
/// for all ten and appends how many results it sees.
pub fn fanout() -> StateGraph<Fan> {
    let mut g = StateGraph::<Fan>::named("fanout");
    g.add_node("split", |_s: Arc<Fan>, _c: Context| async {
        Ok::<_, NodeError>(FanUpdate::default())
    });
    let workers: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    for (i, w) in workers.iter().enumerate() {
        g.add_node(w.as_str(), move |_s: Arc<Fan>, _c: Context| async move {
            Ok::<_, NodeError>(FanUpdate::default().results(vec![i as i64]))
        });
        g.add_edge("split", w.as_str());
    }
    g.add_node("join", |s: Arc<Fan>, _c: Context| async move {
        Ok::<_, NodeError>(FanUpdate::default().results(vec![s.results.len() as i64]))
    });
    g.add_edge(START, "split");
    g.add_join(workers, "join");
    g.add_edge("join", END);
    g
}
