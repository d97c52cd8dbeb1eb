//! The shared workloads' graphs (`workload_graphs.rs`) as a binary registers them
//! (`GraphFactory`), each with a graph file asking for `sync` durability (a step's checkpoint on
//! disk before the next starts). Used by the benches that run them through a registry (the
//! worker's queue bench, the server bench's `examples/serve_bench.rs`); include with `#[path]`
//! beside `workload_graphs.rs`, as `mod workload_graphs`.

use super::workload_graphs::{self, Count, Fan};
use stategraph::CompiledGraph;
use stategraph_registry::{BuildError, GraphFactory, GraphFile};

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
        Ok(workload_graphs::chain(self.name, self.nodes).compile()?)
    }
}

/// `fanout` (`workload_graphs::fanout`).
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
        Ok(workload_graphs::fanout().compile()?)
    }
}
