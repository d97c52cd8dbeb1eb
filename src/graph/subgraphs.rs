//! The graphs a node declares it runs, written by [`NodeSpec::subgraph`] and read back by
//! `CompiledGraph::subgraphs_of` (drawing with xray, reading and editing a child's thread).
//!
//! Both sides are here, apart from `node.rs` and `compiled.rs`, because declaring one names a
//! compiled graph, and a compiled graph holds the builder that holds the node's options: the
//! two files would otherwise import each other through the builder.

use super::compiled::CompiledGraph;
use super::node::NodeSpec;
use crate::run::snapshot::SubgraphView;
use crate::state::State;
use std::sync::Arc;

impl NodeSpec<'_> {
    /// Declares a graph the node runs with [`Context::run_subgraph`](crate::run::context::Context::run_subgraph),
    /// so reading the thread with its subgraphs shows the child's values, its namespace can be
    /// edited, and drawings with xray expand it.
    pub fn subgraph<C: State>(&mut self, graph: &CompiledGraph<C>) -> &mut Self {
        self.options.subgraphs.push(Arc::new(graph.clone()));
        self
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graphs node `node` runs, as it declares them: the node itself
    /// ([`Node::subgraphs`](super::Node::subgraphs)) and [`NodeSpec::subgraph`].
    pub(crate) fn subgraphs_of(&self, node: &str) -> Vec<Arc<dyn SubgraphView>> {
        let Some(i) = self.topology.node_index(node) else {
            return Vec::new();
        };
        let entry = &self.topology.builder.nodes[i];
        let mut views = entry.node.subgraphs();
        views.extend(entry.options.subgraphs.iter().cloned());
        views
    }
}
