//! Which tasks the next superstep runs: static edges, routers, commands, joins, deferral.

use crate::checkpoint::{Frontier, TaskSpec};
use crate::error::RunError;
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
    /// For each join (by its key), the sources that have finished since it last fired.
    joins: BTreeMap<String, Vec<String>>,
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

    /// Triggers the targets of the finished node's static edges.
    fn follow_statics(&mut self, statics: &[Target]) {
        for t in statics {
            if let Target::Node(i) = *t {
                self.node(i);
            }
        }
    }

    /// Follows the destinations of `f`'s command; its node must have declared each one.
    fn follow_command(&mut self, f: &Finished<'_>, step: u64) -> Result<(), RunError> {
        if f.goto.is_empty() {
            return Ok(());
        }
        let topology = self.topology;
        let allowed = f
            .node
            .map(|i| topology.builder.nodes[i].options.destinations.as_slice())
            .unwrap_or(&[]);
        for g in f.goto {
            declared(g, allowed).map_err(|target| {
                // Only this error needs the node's name: a command that names declared targets,
                // the usual case, copies nothing.
                let node = f.node.map_or("", |i| topology.node_name(i).as_ref());
                RunError::UndeclaredTarget {
                    from: format!("a command of node `{node}`"),
                    target,
                    declared: allowed.to_vec(),
                    step,
                }
            })?;
            self.goto(g);
        }
        Ok(())
    }

    /// Asks each router leaving the finished node where to go, on the state after the merge;
    /// a router may only name the targets it declared.
    fn follow_routers(&mut self, routers: &[usize], state: &S, step: u64) -> Result<(), RunError> {
        for &r in routers {
            let router = &self.topology.builder.routers[r];
            let route = (router.route)(state);
            for g in route.targets() {
                declared(g, &router.targets).map_err(|target| RunError::UndeclaredTarget {
                    from: format!("the router after `{}`", router.from),
                    target,
                    declared: router.targets.clone(),
                    step,
                })?;
                self.goto(g);
            }
        }
        Ok(())
    }

    /// Records node `i`'s arrival at each join it is a source of; a join whose sources have all
    /// arrived triggers its target and starts over.
    fn arrive_at_joins(&mut self, i: usize) {
        let topology = self.topology;
        for &j in &topology.outgoing[i].joins {
            let join = &topology.joins[j];
            let seen = self.joins.entry(join.key.clone()).or_default();
            let name = topology.node_name(i);
            if !seen.iter().any(|s| **s == **name) {
                seen.push(name.to_string());
            }
            if join
                .sources
                .iter()
                .all(|&s| seen.iter().any(|n| **n == **topology.node_name(s)))
            {
                self.joins.remove(&join.key);
                self.node(join.target);
            }
        }
    }

    /// The frontier: triggered nodes in declaration order, then sends; deferred nodes run only
    /// when nothing else is pending.
    fn into_frontier(mut self) -> Frontier {
        for list in [&mut self.pull, &mut self.deferred] {
            list.sort_unstable();
            list.dedup();
        }
        let topology = self.topology;
        // `str::to_owned`, not `to_string`: on an `Arc<str>` the latter goes through `Display`.
        let name = |i: &usize| topology.node_name(*i).as_ref().to_owned();
        let mut tasks: Vec<TaskSpec> = self
            .pull
            .iter()
            .map(|i| TaskSpec {
                node: name(i),
                arg: None,
            })
            .collect();
        tasks.extend(self.sends);
        let mut deferred: Vec<String> = self.deferred.iter().map(name).collect();
        if tasks.is_empty() && !deferred.is_empty() {
            // Nothing else is pending: the deferred nodes' turn.
            tasks = deferred
                .drain(..)
                .map(|node| TaskSpec { node, arg: None })
                .collect();
        }
        Frontier {
            tasks,
            deferred,
            joins: self.joins,
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
        joins: previous.joins.clone(),
    };
    // Per finished task, in task order: static edges, its command, routers, then joins (the
    // order the frontier's sends and errors have always come in).
    for f in finished {
        let out = topology.outgoing_of(f.node);
        next.follow_statics(&out.statics);
        next.follow_command(f, step)?;
        next.follow_routers(&out.routers, state, step)?;
        if let Some(i) = f.node {
            next.arrive_at_joins(i);
        }
    }
    Ok(next.into_frontier())
}
