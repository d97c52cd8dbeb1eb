//! The graphs the bench's workers run: `chain` and `fanout` of `../shared/bench/WORKLOADS.md`
//! (`benches/support/workload_graphs.rs`, `workload_factories.rs`), registered as a `graph worker` binary would register
//! its graphs, each with a graph file asking for `sync` durability.

#[path = "../../../../benches/support/workload_factories.rs"]
mod workload_factories;
#[path = "../../../../benches/support/workload_graphs.rs"]
mod workload_graphs;

use stategraph_registry::Registry;
use workload_factories::{Chain, Fanout};

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
    registry.register(Chain {
        name: "chain",
        nodes: 100,
        graph_file: "graph = \"chain\"\ndurability = \"sync\"\n",
    });
    registry.register(Fanout);
    registry
}
