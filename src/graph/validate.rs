//! Compile-time checks, on a petgraph view of the graph: first the names (nodes, and what
//! every edge, join, router and command destination refers to), then, when those are sound,
//! the flow (an entry point; every node reachable from START, with a way out and a path to
//! END).

use super::builder::StateGraph;
use super::command::{END, START};
use super::on_error::{failure_update, NodeFailure};
use crate::state::State;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, Reversed};
use std::collections::HashMap;

/// Every problem of the graph, each phrased as what to fix. Empty when the graph is sound.
pub(crate) fn check<S: State>(g: &StateGraph<S>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut view = View::new();
    view.add_nodes(g, &mut problems);
    view.add_links(g, &mut problems);
    problems.extend(on_error_problems(g));
    if !problems.is_empty() {
        return problems;
    }
    view.flow_problems()
}

/// The graph as petgraph sees it: START, END and the nodes, joined by every way a run can go.
struct View {
    pg: DiGraph<String, ()>,
    ids: HashMap<String, NodeIndex>,
    start: NodeIndex,
    end: NodeIndex,
}

impl View {
    fn new() -> View {
        let mut pg: DiGraph<String, ()> = DiGraph::new();
        let start = pg.add_node(START.to_string());
        let end = pg.add_node(END.to_string());
        let ids = HashMap::from([(START.to_string(), start), (END.to_string(), end)]);
        View {
            pg,
            ids,
            start,
            end,
        }
    }

    /// Adds each node, refusing empty, reserved and repeated names.
    fn add_nodes<S: State>(&mut self, g: &StateGraph<S>, problems: &mut Vec<String>) {
        for n in &g.nodes {
            let name = n.name.to_string();
            if name.is_empty() {
                problems.push("a node has an empty name: give every node a name".to_string());
            } else if name == START || name == END {
                problems.push(format!("a node is named `{name}`, which is reserved for the graph's start and end: rename it"));
            } else if self.ids.contains_key(&name) {
                problems.push(format!(
                    "two nodes are named `{name}`: node names must be unique, rename one"
                ));
            } else {
                let index = self.pg.add_node(name.clone());
                self.ids.insert(name, index);
            }
        }
    }

    /// Adds every edge, join, conditional edge and command destination.
    fn add_links<S: State>(&mut self, g: &StateGraph<S>, problems: &mut Vec<String>) {
        for (from, to) in &g.edges {
            self.link(problems, from, to, "an edge");
        }
        for j in &g.joins {
            if j.sources.is_empty() {
                problems.push(format!(
                    "the join into `{}` has no sources: name the nodes it waits for",
                    j.target
                ));
            }
            for s in &j.sources {
                self.link(problems, s, &j.target, "a join");
            }
        }
        for r in &g.routers {
            if r.targets.is_empty() {
                problems.push(format!(
                    "the router after `{}` declares no targets: list every node (or END) it may return",
                    r.from
                ));
            }
            for t in &r.targets {
                self.link(problems, &r.from, t, "a conditional edge");
            }
        }
        for n in &g.nodes {
            for t in &n.options.destinations {
                self.link(problems, &n.name, t, "a command destination");
            }
        }
    }

    fn link(&mut self, problems: &mut Vec<String>, from: &str, to: &str, what: &str) {
        let a = self.ids.get(from).copied();
        let b = self.ids.get(to).copied();
        if a.is_none() {
            problems.push(format!("{what} starts at `{from}`, which is not a node: add_node(\"{from}\", ..) first or fix the name"));
        }
        if b.is_none() {
            problems.push(format!("{what} from `{from}` goes to `{to}`, which is not a node: add_node(\"{to}\", ..) or fix the name"));
        }
        if from == END {
            problems.push(format!(
                "{what} leaves END: nothing runs after END, remove it"
            ));
        }
        if to == START {
            problems.push(format!(
                "{what} from `{from}` goes to START: route to a node instead"
            ));
        }
        if let (Some(a), Some(b)) = (a, b) {
            self.pg.add_edge(a, b, ());
        }
    }

    /// What stops a run from going START to END through every node.
    fn flow_problems(&self) -> Vec<String> {
        let pg = &self.pg;
        if pg.neighbors(self.start).next().is_none() {
            return vec![
                "the graph has no entry point: add an edge from START to the first node"
                    .to_string(),
            ];
        }
        let mut reachable = vec![false; pg.node_count()];
        let mut bfs = Bfs::new(pg, self.start);
        while let Some(i) = bfs.next(pg) {
            reachable[i.index()] = true;
        }
        let mut reaches_end = vec![false; pg.node_count()];
        let reversed = Reversed(pg);
        let mut bfs = Bfs::new(reversed, self.end);
        while let Some(i) = bfs.next(reversed) {
            reaches_end[i.index()] = true;
        }
        let mut problems = Vec::new();
        for i in pg.node_indices() {
            if i == self.start || i == self.end {
                continue;
            }
            let name = &pg[i];
            if !reachable[i.index()] {
                problems.push(format!("node `{name}` can never run: nothing leads to it from START; add an edge to it or remove it"));
            } else if pg.neighbors(i).next().is_none() {
                problems.push(format!("node `{name}` has no way out: add an edge from it (to END if the run finishes there)"));
            } else if !reaches_end[i.index()] {
                problems.push(format!("from node `{name}` the run can never reach END: give one of the nodes it leads to a way to END"));
            }
        }
        problems
    }
}

/// What is wrong with the graph's error handlers: a field that cannot hold a failure.
fn on_error_problems<S: State>(g: &StateGraph<S>) -> Vec<String> {
    let mut problems = Vec::new();
    for n in &g.nodes {
        let Some(on_error) = &n.options.on_error else {
            continue;
        };
        if let Err(why) = failure_update::<S>(&on_error.field, &NodeFailure::default()) {
            problems.push(format!(
                "node `{}` writes its failures into state field `{}`, which cannot hold one \
                 ({why}): declare it as `Option<NodeFailure>` (or `Vec<NodeFailure>` with \
                 #[state(append)]) or name another field",
                n.name, on_error.field
            ));
        }
    }
    problems
}
