//! Which tasks must come before which, and the cycles that make a tree unsolvable.

use super::task_tree::Task;
use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// `(a, b)` when `a` needs `b` first: its dependencies and its children.
pub(crate) fn needs_edges(tasks: &[Task]) -> Vec<(usize, usize)> {
    tasks
        .iter()
        .enumerate()
        .flat_map(|(i, t)| t.depends_on.iter().chain(&t.children).map(move |&j| (i, j)))
        .collect()
}

/// Every cycle of the graph over `0..n` with `edges`, one per strongly connected component,
/// each a shortest cycle through its lowest node, that node repeated at the end.
pub(crate) fn find_cycles(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut graph = DiGraph::<(), ()>::with_capacity(n, edges.len());
    for _ in 0..n {
        graph.add_node(());
    }
    for &(a, b) in edges {
        graph.add_edge(NodeIndex::new(a), NodeIndex::new(b), ());
    }
    let mut cycles: Vec<Vec<usize>> = tarjan_scc(&graph)
        .into_iter()
        .filter_map(|component| {
            let members: BTreeSet<usize> = component.iter().map(|n| n.index()).collect();
            let start = *members.first()?;
            let looped = edges.contains(&(start, start));
            if members.len() == 1 && !looped {
                return None;
            }
            Some(shortest_cycle(start, &members, edges))
        })
        .collect();
    cycles.sort();
    cycles
}

fn shortest_cycle(start: usize, members: &BTreeSet<usize>, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut from: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        let mut next: Vec<usize> = edges
            .iter()
            .filter(|(a, b)| *a == at && members.contains(b))
            .map(|(_, b)| *b)
            .collect();
        next.sort_unstable();
        for b in next {
            if b == start {
                // Walk back from `at` to `start`, then read it forwards: start, ..., at, start.
                let mut path = vec![at];
                let mut cur = at;
                while cur != start {
                    cur = from[&cur];
                    path.push(cur);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = from.entry(b) {
                e.insert(at);
                queue.push_back(b);
            }
        }
    }
    vec![start, start]
}
