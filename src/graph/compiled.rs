//! A validated graph, indexed for the runtime, and `compile`, which makes one of a builder.

use super::builder::StateGraph;
use super::command::{END, START};
use super::validate;
use crate::checkpoint::Checkpointer;
use crate::error::GraphError;
use crate::state::State;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Where a static edge leads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Target {
    Node(usize),
    End,
}

/// Everything that can fire after one node (or after START).
#[derive(Default)]
pub(crate) struct Outgoing {
    pub(crate) statics: Vec<Target>,
    /// Indices into the builder's routers.
    pub(crate) routers: Vec<usize>,
    /// Indices into `Topology::joins` this node is a source of.
    pub(crate) joins: Vec<usize>,
}

pub(crate) struct Join {
    pub(crate) key: String,
    pub(crate) sources: Vec<usize>,
    pub(crate) target: usize,
}

pub(crate) struct Topology<S: State> {
    pub(crate) builder: StateGraph<S>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) start: Outgoing,
    pub(crate) outgoing: Vec<Outgoing>,
    pub(crate) joins: Vec<Join>,
}

impl<S: State> Topology<S> {
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub(crate) fn node_name(&self, i: usize) -> &Arc<str> {
        &self.builder.nodes[i].name
    }

    pub(crate) fn outgoing_of(&self, node: Option<usize>) -> &Outgoing {
        match node {
            Some(i) => &self.outgoing[i],
            None => &self.start,
        }
    }
}

/// A graph ready to run: validated, indexed, and optionally attached to a checkpointer.
///
/// Cheap to clone; clones share the graph.
pub struct CompiledGraph<S: State> {
    pub(crate) topology: Arc<Topology<S>>,
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    pub(crate) interrupt_before: Arc<BTreeSet<String>>,
    pub(crate) interrupt_after: Arc<BTreeSet<String>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        CompiledGraph {
            topology: self.topology.clone(),
            checkpointer: self.checkpointer.clone(),
            interrupt_before: self.interrupt_before.clone(),
            interrupt_after: self.interrupt_after.clone(),
        }
    }
}

impl<S: State> std::fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("name", &self.name())
            .field("nodes", &self.node_names())
            .field("checkpointer", &self.checkpointer.is_some())
            .finish()
    }
}

impl<S: State> CompiledGraph<S> {
    pub(crate) fn from_builder(builder: StateGraph<S>) -> Self {
        let index: HashMap<String, usize> = builder
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.to_string(), i))
            .collect();
        let target = |name: &str| {
            if name == END {
                Some(Target::End)
            } else {
                index.get(name).map(|&i| Target::Node(i))
            }
        };
        let mut start = Outgoing::default();
        let mut outgoing: Vec<Outgoing> =
            builder.nodes.iter().map(|_| Outgoing::default()).collect();
        for (from, to) in &builder.edges {
            if let Some(t) = target(to) {
                if from == START {
                    start.statics.push(t);
                } else if let Some(&i) = index.get(from.as_str()) {
                    outgoing[i].statics.push(t);
                }
            }
        }
        for (r, router) in builder.routers.iter().enumerate() {
            if router.from == START {
                start.routers.push(r);
            } else if let Some(&i) = index.get(router.from.as_str()) {
                outgoing[i].routers.push(r);
            }
        }
        let mut joins = Vec::new();
        for j in &builder.joins {
            let (Some(&target), Some(sources)) = (
                index.get(j.target.as_str()),
                j.sources
                    .iter()
                    .map(|s| index.get(s.as_str()).copied())
                    .collect::<Option<Vec<usize>>>(),
            ) else {
                continue;
            };
            let id = joins.len();
            for &s in &sources {
                outgoing[s].joins.push(id);
            }
            joins.push(Join {
                key: format!("{}->{}", j.sources.join("+"), j.target),
                sources,
                target,
            });
        }
        CompiledGraph {
            topology: Arc::new(Topology {
                builder,
                index,
                start,
                outgoing,
                joins,
            }),
            checkpointer: None,
            interrupt_before: Arc::new(BTreeSet::new()),
            interrupt_after: Arc::new(BTreeSet::new()),
        }
    }

    /// Saves a checkpoint after every superstep into `checkpointer`, which makes runs
    /// resumable, inspectable and editable.
    pub fn with_checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The attached checkpointer, if any.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.checkpointer.as_ref()
    }

    /// Pauses every run before these nodes run (a static breakpoint).
    pub fn interrupt_before<I, T>(mut self, nodes: I) -> Result<Self, GraphError>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let names = self.check_names(nodes, "interrupt_before")?;
        self.interrupt_before = Arc::new(names);
        Ok(self)
    }

    /// Pauses every run after these nodes ran (a static breakpoint).
    pub fn interrupt_after<I, T>(mut self, nodes: I) -> Result<Self, GraphError>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let names = self.check_names(nodes, "interrupt_after")?;
        self.interrupt_after = Arc::new(names);
        Ok(self)
    }

    pub(crate) fn check_names<I, T>(
        &self,
        nodes: I,
        context: &'static str,
    ) -> Result<BTreeSet<String>, GraphError>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        nodes
            .into_iter()
            .map(Into::into)
            .map(|name| {
                if self.topology.index.contains_key(&name) {
                    Ok(name)
                } else {
                    Err(GraphError::UnknownNode {
                        name,
                        context,
                        known: self.node_names().join(", "),
                    })
                }
            })
            .collect()
    }

    /// The graph's name, if it was built with [`StateGraph::named`].
    pub fn name(&self) -> Option<&str> {
        self.topology.builder.name.as_deref()
    }

    /// The nodes, in declaration order.
    pub fn node_names(&self) -> Vec<&str> {
        self.topology
            .builder
            .nodes
            .iter()
            .map(|n| &*n.name)
            .collect()
    }
}

impl<S: State> StateGraph<S> {
    /// Checks the graph and freezes it for running. Every problem found is reported, each with
    /// what to change.
    pub fn compile(self) -> Result<CompiledGraph<S>, GraphError> {
        let problems = validate::check(&self);
        if !problems.is_empty() {
            return Err(GraphError::Invalid(problems));
        }
        Ok(CompiledGraph::from_builder(self))
    }
}
