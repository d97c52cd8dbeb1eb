//! Compile-time checks, on a petgraph view of the graph.

use super::builder::StateGraph;
use super::command::{END, START};
use crate::state::State;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, Reversed};
use std::collections::HashMap;

/// Every problem of the graph, each phrased as what to fix. Empty when the graph is sound.
pub(crate) fn check<S: State>(g: &StateGraph<S>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut pg: DiGraph<String, ()> = DiGraph::new();
    let mut ids: HashMap<String, NodeIndex> = HashMap::new();
    let start = pg.add_node(START.to_string());
    let end = pg.add_node(END.to_string());
    ids.insert(START.to_string(), start);
    ids.insert(END.to_string(), end);

    for n in &g.nodes {
        let name = n.name.to_string();
        if name.is_empty() {
            problems.push("a node has an empty name: give every node a name".to_string());
        } else if name == START || name == END {
            problems.push(format!("a node is named `{name}`, which is reserved for the graph's start and end: rename it"));
        } else if ids.contains_key(&name) {
            problems.push(format!(
                "two nodes are named `{name}`: node names must be unique, rename one"
            ));
        } else {
            ids.insert(name.clone(), pg.add_node(name));
        }
    }

    let mut link = |problems: &mut Vec<String>, from: &str, to: &str, what: &str| {
        let a = ids.get(from);
        let b = ids.get(to);
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
        if let (Some(&a), Some(&b)) = (a, b) {
            pg.add_edge(a, b, ());
        }
    };

    for (from, to) in &g.edges {
        link(&mut problems, from, to, "an edge");
    }
    for j in &g.joins {
        if j.sources.is_empty() {
            problems.push(format!(
                "the join into `{}` has no sources: name the nodes it waits for",
                j.target
            ));
        }
        for s in &j.sources {
            link(&mut problems, s, &j.target, "a join");
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
            link(&mut problems, &r.from, t, "a conditional edge");
        }
    }
    for n in &g.nodes {
        for t in &n.options.destinations {
            link(&mut problems, &n.name, t, "a command destination");
        }
    }
    if !problems.is_empty() {
        return problems;
    }

    if pg.neighbors(start).next().is_none() {
        problems.push(
            "the graph has no entry point: add an edge from START to the first node".to_string(),
        );
        return problems;
    }
    let mut reachable = vec![false; pg.node_count()];
    let mut bfs = Bfs::new(&pg, start);
    while let Some(i) = bfs.next(&pg) {
        reachable[i.index()] = true;
    }
    let mut reaches_end = vec![false; pg.node_count()];
    let reversed = Reversed(&pg);
    let mut bfs = Bfs::new(reversed, end);
    while let Some(i) = bfs.next(reversed) {
        reaches_end[i.index()] = true;
    }
    for i in pg.node_indices() {
        if i == start || i == end {
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
