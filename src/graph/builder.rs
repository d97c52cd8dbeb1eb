//! Building a graph: nodes, edges, joins and routers, collected here and checked by `compile`
//! (`compiled.rs`, which this file does not need: a builder knows nothing of what it becomes).

use super::command::{Route, END, START};
use super::node::{IntoNode, Node, NodeOptions, NodeSpec};
use crate::state::State;
use std::sync::Arc;

/// A router: looks at the state after a superstep and picks the next nodes.
pub type RouterFn<S> = Arc<dyn Fn(&S) -> Route + Send + Sync>;

pub(crate) struct NodeEntry<S: State> {
    pub(crate) name: Arc<str>,
    pub(crate) node: Arc<dyn Node<S>>,
    pub(crate) options: NodeOptions,
}

pub(crate) struct RouterEntry<S: State> {
    pub(crate) from: String,
    pub(crate) label: String,
    pub(crate) targets: Vec<String>,
    pub(crate) route: RouterFn<S>,
}

pub(crate) struct JoinEntry {
    pub(crate) sources: Vec<String>,
    pub(crate) target: String,
}

/// A graph under construction over the state type `S`.
///
/// Add nodes and edges, then [`compile`](StateGraph::compile), which checks the whole graph and
/// reports every problem at once.
///
/// ```
/// use std::sync::Arc;
/// use serde::{Deserialize, Serialize};
/// use stategraph::{graph::StateGraph, runtime::Context, State, END, START};
///
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Counter { #[state(add)] n: u32 }
///
/// let mut g = StateGraph::<Counter>::new();
/// g.add_node("inc", |_s: Arc<Counter>, _ctx: Context| async { Ok(CounterUpdate::default().n(1u32)) });
/// g.add_edge(START, "inc");
/// g.add_conditional_edges("inc", |s: &Counter| if s.n < 3 { "inc" } else { END }, ["inc", END]);
/// let graph = g.compile().unwrap();
/// # let _ = graph;
/// ```
pub struct StateGraph<S: State> {
    pub(crate) name: Option<String>,
    pub(crate) nodes: Vec<NodeEntry<S>>,
    pub(crate) edges: Vec<(String, String)>,
    pub(crate) joins: Vec<JoinEntry>,
    pub(crate) routers: Vec<RouterEntry<S>>,
}

impl<S: State> Default for StateGraph<S> {
    fn default() -> Self {
        Self::new()
    }
}

/// The handle returned by [`StateGraph::add_conditional_edges`], to label the router's edges.
pub struct RouterSpec<'g> {
    label: &'g mut String,
}

impl RouterSpec<'_> {
    /// Labels the router's edges in drawings (default: `route`).
    pub fn label(&mut self, label: impl Into<String>) -> &mut Self {
        *self.label = label.into();
        self
    }
}

impl<S: State> StateGraph<S> {
    /// An empty graph.
    pub fn new() -> Self {
        StateGraph {
            name: None,
            nodes: Vec::new(),
            edges: Vec::new(),
            joins: Vec::new(),
            routers: Vec::new(),
        }
    }

    /// An empty graph with a name (shown in drawings and stored with its checkpoints).
    pub fn named(name: impl Into<String>) -> Self {
        StateGraph {
            name: Some(name.into()),
            ..Self::new()
        }
    }

    /// Adds a node: an async closure or `async fn` taking the state and a [`Context`](crate::run::context::Context) and
    /// returning an update or a [`Command`](crate::Command); a [`Node`] impl; a compiled graph
    /// over the same state (a subgraph, checkpointed under this node's namespace); or a
    /// [`Subgraph`](crate::runtime::Subgraph) mapping to another state type.
    pub fn add_node<M>(
        &mut self,
        name: impl Into<String>,
        node: impl IntoNode<S, M>,
    ) -> NodeSpec<'_> {
        self.push_node(name.into(), node.into_node())
    }

    /// Adds a node from a type implementing [`Node`] (the same as [`add_node`](Self::add_node)).
    pub fn add_node_impl(&mut self, name: impl Into<String>, node: impl Node<S>) -> NodeSpec<'_> {
        self.push_node(name.into(), Arc::new(node))
    }

    fn push_node(&mut self, name: String, node: Arc<dyn Node<S>>) -> NodeSpec<'_> {
        self.nodes.push(NodeEntry {
            name: name.into(),
            node,
            options: NodeOptions::default(),
        });
        let last = self.nodes.len() - 1;
        NodeSpec {
            options: &mut self.nodes[last].options,
        }
    }

    /// Adds a static edge: when `from` finishes, `to` runs in the next superstep. Several edges
    /// from one node fan out: their targets run together in one superstep.
    pub fn add_edge(&mut self, from: impl Into<String>, to: impl Into<String>) -> &mut Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// Adds a join: `target` runs once every one of `sources` has finished (in any supersteps
    /// since it last ran).
    pub fn add_join<I, T>(&mut self, sources: I, target: impl Into<String>) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.joins.push(JoinEntry {
            sources: sources.into_iter().map(Into::into).collect(),
            target: target.into(),
        });
        self
    }

    /// Adds a router after `from`: it sees the state once the superstep's updates are merged and
    /// returns one or more of `targets` (node names or [`END`]), or [`Send`](crate::Send)
    /// invocations of them. Returning a target not declared here is a run-time error.
    pub fn add_conditional_edges<F, R, I, T>(
        &mut self,
        from: impl Into<String>,
        router: F,
        targets: I,
    ) -> RouterSpec<'_>
    where
        F: Fn(&S) -> R + Send + Sync + 'static,
        R: Into<Route>,
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.routers.push(RouterEntry {
            from: from.into(),
            label: "route".to_string(),
            targets: targets.into_iter().map(Into::into).collect(),
            route: Arc::new(move |s: &S| router(s).into()),
        });
        let last = self.routers.len() - 1;
        RouterSpec {
            label: &mut self.routers[last].label,
        }
    }

    /// Adds a router that returns a key, and a path map from keys to targets (LangGraph's
    /// `path_map`): the targets are declared by the map. A key the map lacks is taken as a
    /// target name, so it fails as an undeclared target naming it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{graph::StateGraph, runtime::Context, State, END, START};
    /// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { n: u32 }
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("work", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default().n(1u32)) });
    /// g.add_edge(START, "work");
    /// g.add_conditional_edges_map(
    ///     "work",
    ///     |s: &S| if s.n < 3 { "again" } else { "stop" },
    ///     [("again", "work"), ("stop", END)],
    /// );
    /// # g.compile().unwrap();
    /// ```
    pub fn add_conditional_edges_map<F, K, I, A, B>(
        &mut self,
        from: impl Into<String>,
        router: F,
        path_map: I,
    ) -> RouterSpec<'_>
    where
        F: Fn(&S) -> K + Send + Sync + 'static,
        K: AsRef<str>,
        I: IntoIterator<Item = (A, B)>,
        A: Into<String>,
        B: Into<String>,
    {
        let map: std::collections::BTreeMap<String, String> = path_map
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let mut targets: Vec<String> = map.values().cloned().collect();
        targets.sort();
        targets.dedup();
        self.add_conditional_edges(
            from,
            move |s: &S| {
                let key = router(s);
                let key = key.as_ref();
                Route::from(map.get(key).map(String::as_str).unwrap_or(key))
            },
            targets,
        )
    }

    /// Sets the entry point: shorthand for `add_edge(START, node)`.
    pub fn set_entry(&mut self, node: impl Into<String>) -> &mut Self {
        self.add_edge(START, node)
    }

    /// Sets a finish point: shorthand for `add_edge(node, END)`.
    pub fn set_finish(&mut self, node: impl Into<String>) -> &mut Self {
        self.add_edge(node, END)
    }
}
