//! Example agents, one folder each. Every agent is a graph plus a
//! [`GraphFactory`](stategraph_registry::GraphFactory) so the registry (and so the `graph` command)
//! can run it by name with its `graphs/<name>.toml`.
//!
//! - [`memo`]: the main demo: a 13-stage investment memo over a company's data room, keyless
//!   offline or through a model, each stage leaving an artifact.
//! - [`pipeline`]: a small keyless example: outline, parallel drafts, a review pause, publish.
//! - [`research`]: the plan-execute-reflect research agent over a reviewable plan of todos.
//! - [`agent`]: the tool-using agent: tool todos worked through in a workspace with a
//!   model↔tool loop, round limits and escalation, verified and reported.
//! - [`brief`]: a small keyless function graph (the functional API): durable tasks in a plain
//!   async function, a pause for approval.
//! - [`tree`]: the task-tree workflow: decompose a task file into a tree of task files, let a
//!   person edit them, solve the tree leaves first.
//!
//! What a failed step's model requests cost is kept through `stategraph-spend`, so the step's
//! next successful run adds it to the usage ledger.
//!
//! Invariant: agents build graphs with the public API and know nothing of the command line.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod brief;
pub mod memo;
pub mod pipeline;
pub mod research;
pub mod tree;

use stategraph_registry::AnyFactory;
use std::sync::Arc;

/// The factories of every built-in agent, for [`Registry::extend`](stategraph_registry::Registry::extend).
///
/// Making them reads nothing from the environment: an agent that needs a model builds it when
/// it first calls it, and checks it is configured only before a run
/// ([`GraphFactory::preflight`](stategraph_registry::GraphFactory::preflight)).
///
/// ```
/// let names: Vec<String> = stategraph_agents::builtin_factories().iter().map(|f| f.name().to_string()).collect();
/// assert_eq!(names, ["memo", "pipeline", "research", "tree", "agent", "brief"]);
/// ```
pub fn builtin_factories() -> Vec<Arc<dyn AnyFactory>> {
    vec![
        Arc::new(memo::Memo::from_env()),
        Arc::new(pipeline::Pipeline),
        Arc::new(research::Research::from_env()),
        Arc::new(tree::TreeGraph::from_env()),
        Arc::new(agent::Agent::from_env()),
        Arc::new(brief::Brief),
    ]
}

#[cfg(test)]
mod tests {
    use stategraph_registry::Registry;

    /// A thread's checkpoints carry the compiled graph's name, which `graph threads` lists: it
    /// must be the name the user ran, also for a graph built on another (`agent` on research).
    #[test]
    fn every_graph_is_named_as_its_factory() {
        let mut registry = Registry::new();
        registry.extend(super::builtin_factories());
        for factory in registry.iter() {
            let graph = registry.resolve(factory.name(), &[]).unwrap();
            assert_eq!(graph.build(None).unwrap().name(), factory.name());
        }
    }
}
