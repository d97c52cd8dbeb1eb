//! Which tasks the next superstep runs: static edges, routers, commands, joins, deferral.

use super::error::RunError;
use crate::checkpoint::{Frontier, TaskSpec};
use crate::graph::{Goto, Target, Topology, END};
use crate::state::State;
use std::collections::BTreeMap;

/// A task that finished in the step: its node (`None` for START) and its command's destinations.
pub(crate) struct Finished<'a> {
    pub(crate) node: Option<usize>,
    pub(crate) goto: &'a [Goto],
}

struct Next<'t, S: State> {
    topology: &'t Topology<S>,
    /// Triggered nodes by declaration index; sorted and deduplicated at the end (a Vec, not a
    /// set: frontiers are small and this runs every step).
    pull: Vec<usize>,
    deferred: Vec<usize>,
    sends: Vec<TaskSpec>,
}

impl<S: State> Next<'_, S> {
    fn node(&mut self, i: usize) {
        if self.topology.builder.nodes[i].options.deferred {
            self.deferred.push(i);
        } else {
            self.pull.push(i);
        }
    }

    fn goto(&mut self, goto: &Goto) {
        match goto {
            Goto::Node(name) => {
                if let Some(i) = self.topology.node_index(name) {
                    self.node(i);
                }
            }
            Goto::Send(send) => self.sends.push(TaskSpec {
                node: send.node.clone(),
                arg: Some(send.arg.clone()),
            }),
            Goto::End => {}
        }
    }
}

fn declared(goto: &Goto, targets: &[String]) -> Result<(), String> {
    let name = match goto {
        Goto::Node(n) => n.as_str(),
        Goto::Send(s) => s.node.as_str(),
        Goto::End => END,
    };
    if targets.iter().any(|t| t == name) {
        Ok(())
    } else {
        Err(name.to_string())
    }
}

/// Computes the frontier after a step whose tasks finished in `finished` (task order), given the
/// state after the step's merge and the join/deferral bookkeeping carried from `previous`.
pub(crate) fn advance<S: State>(
    topology: &Topology<S>,
    state: &S,
    finished: &[Finished<'_>],
    previous: &Frontier,
    step: u64,
) -> Result<Frontier, RunError> {
    let mut next = Next {
        topology,
        pull: Vec::new(),
        deferred: previous
            .deferred
            .iter()
            .filter_map(|n| topology.node_index(n))
            .collect(),
        sends: Vec::new(),
    };
    let mut joins: BTreeMap<String, Vec<String>> = previous.joins.clone();

    for f in finished {
        let out = topology.outgoing_of(f.node);
        for t in &out.statics {
            if let Target::Node(i) = *t {
                next.node(i);
            }
        }
        if !f.goto.is_empty() {
            let node = f
                .node
                .map(|i| topology.node_name(i).as_ref().to_owned())
                .unwrap_or_default();
            let allowed = f
                .node
                .map(|i| topology.builder.nodes[i].options.destinations.as_slice())
                .unwrap_or(&[]);
            for g in f.goto {
                declared(g, allowed).map_err(|target| RunError::UndeclaredTarget {
                    from: format!("a command of node `{node}`"),
                    target,
                    declared: allowed.to_vec(),
                    step,
                })?;
                next.goto(g);
            }
        }
        for &r in &out.routers {
            let router = &topology.builder.routers[r];
            let route = (router.route)(state);
            for g in route.targets() {
                declared(g, &router.targets).map_err(|target| RunError::UndeclaredTarget {
                    from: format!("the router after `{}`", router.from),
                    target,
                    declared: router.targets.clone(),
                    step,
                })?;
                next.goto(g);
            }
        }
        if let Some(i) = f.node {
            for &j in &topology.outgoing[i].joins {
                let join = &topology.joins[j];
                let seen = joins.entry(join.key.clone()).or_default();
                let name = topology.node_name(i);
                if !seen.iter().any(|s| **s == **name) {
                    seen.push(name.to_string());
                }
                if join
                    .sources
                    .iter()
                    .all(|&s| seen.iter().any(|n| **n == **topology.node_name(s)))
                {
                    joins.remove(&join.key);
                    next.node(join.target);
                }
            }
        }
    }

    for list in [&mut next.pull, &mut next.deferred] {
        list.sort_unstable();
        list.dedup();
    }
    // `str::to_owned`, not `to_string`: on an `Arc<str>` the latter goes through `Display`.
    let name = |i: &usize| topology.node_name(*i).as_ref().to_owned();
    let mut tasks: Vec<TaskSpec> = next
        .pull
        .iter()
        .map(|i| TaskSpec {
            node: name(i),
            arg: None,
        })
        .collect();
    tasks.extend(next.sends);
    let mut deferred: Vec<String> = next.deferred.iter().map(name).collect();
    if tasks.is_empty() && !deferred.is_empty() {
        // Nothing else is pending: the deferred nodes' turn.
        tasks = deferred
            .drain(..)
            .map(|node| TaskSpec { node, arg: None })
            .collect();
    }
    Ok(Frontier {
        tasks,
        deferred,
        joins,
    })
}
