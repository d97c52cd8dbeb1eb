//! The shared workloads' graphs (`../shared/bench/WORKLOADS.md`) as a binary registers them
//! (`GraphFactory`), each with a graph file asking for `sync` durability (a step's checkpoint on
//! disk before the next starts): a chain of nodes that each add one, and the fan-out. Used by
//! the benches that run them through a registry (the worker's queue bench, the server bench's
//! `examples/serve_bench.rs`); include with `#[path]`.

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Count {
    count: i64,
}

/// `nodes` nodes n0.. in a line, each returning `count + 1`, registered as `name`
/// (`graph_file` names it too).
pub struct Chain {
    pub name: &'static str,
    pub nodes: usize,
    pub graph_file: &'static str,
}

impl GraphFactory for Chain {
    type State = Count;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "nodes in a line, each adding one to count (WORKLOADS.md)"
    }
    fn graph_file(&self) -> Option<&'static str> {
        Some(self.graph_file)
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Count>, BuildError> {
        let mut g = StateGraph::<Count>::named(self.name);
        for i in 0..self.nodes {
            g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
                Ok::<_, NodeError>(CountUpdate::default().count(s.count + 1))
            });
            if i > 0 {
                g.add_edge(format!("n{}", i - 1), format!("n{i}"));
            }
        }
        let last = format!("n{}", self.nodes.saturating_sub(1));
        g.add_edge(START, "n0").add_edge(last.as_str(), END);
        Ok(g.compile()?)
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fan {
    #[state(append)]
    results: Vec<i64>,
}

/// `fanout`: `split`, ten workers w0..w9 in one superstep (wi appends i), a `join` that waits
/// for all ten and appends how many results it sees.
pub struct Fanout;

impl GraphFactory for Fanout {
    type State = Fan;
    fn name(&self) -> &str {
        "fanout"
    }
    fn description(&self) -> &str {
        "split, ten parallel workers, join (WORKLOADS.md)"
    }
    fn graph_file(&self) -> Option<&'static str> {
        Some("graph = \"fanout\"\ndurability = \"sync\"\n")
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Fan>, BuildError> {
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
        Ok(g.compile()?)
    }
}
