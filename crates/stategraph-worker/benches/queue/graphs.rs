//! The graphs the bench's workers run: `chain` and `fanout` of `../shared/bench/WORKLOADS.md`
//! (the same nodes as `benches/workloads.rs` builds), registered as a `graph worker` binary
//! would register its graphs, each with a graph file asking for `sync` durability (a step's
//! checkpoint committed before the next step starts).

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile, Registry};
use std::sync::Arc;

/// Whether a final state (as JSON) is the one an uninterrupted run ends in.
pub type EndedWell = fn(&serde_json::Value) -> bool;

/// Node steps one run of `graph` takes, and how to tell it ended well.
pub fn shape(graph: &str) -> Option<(usize, EndedWell)> {
    match graph {
        "chain" => Some((100, |s| s["count"] == 100)),
        "fanout" => Some((12, |s| {
            let results = s["results"].as_array();
            results.is_some_and(|r| r.len() == 11 && r.last() == Some(&10.into()))
        })),
        _ => None,
    }
}

pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Chain);
    registry.register(Fanout);
    registry
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Count {
    count: i64,
}

/// `chain`: 100 nodes in a line, each adding one.
struct Chain;

impl GraphFactory for Chain {
    type State = Count;
    fn name(&self) -> &str {
        "chain"
    }
    fn description(&self) -> &str {
        "100 nodes in a line (WORKLOADS.md)"
    }
    fn graph_file(&self) -> Option<&'static str> {
        Some("graph = \"chain\"\ndurability = \"sync\"\n")
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Count>, BuildError> {
        let mut g = StateGraph::<Count>::named("chain");
        for i in 0..100 {
            g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
                Ok::<_, NodeError>(CountUpdate::default().count(s.count + 1))
            });
            if i > 0 {
                g.add_edge(format!("n{}", i - 1), format!("n{i}"));
            }
        }
        g.add_edge(START, "n0").add_edge("n99", END);
        Ok(g.compile()?)
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fan {
    #[state(append)]
    results: Vec<i64>,
}

/// `fanout`: `split`, ten parallel workers, a `join`.
struct Fanout;

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
