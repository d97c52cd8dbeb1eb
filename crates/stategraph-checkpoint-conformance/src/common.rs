//! The small graphs the checks run, and `Probe`, which counts how often each node ran and makes
//! chosen nodes fail.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::CheckpointId;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, HistoryQuery, NodeError};
use stategraph::{State, StateGraph, END, START};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The state of most checks: every node appends its name.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    #[state(append)]
    pub steps: Vec<String>,
}

/// An update appending these entries.
pub fn entries(items: &[&str]) -> LogUpdate {
    LogUpdate::default().steps(items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// The node function type the builders below hand out.
pub type NodeFn = Box<
    dyn Fn(Arc<Log>, Context) -> BoxFuture<'static, Result<LogUpdate, NodeError>> + Send + Sync,
>;

/// Counts each node's executions and breaks nodes on demand.
#[derive(Clone, Default)]
pub struct Probe {
    runs: Arc<Mutex<BTreeMap<String, Arc<AtomicUsize>>>>,
    broken: Arc<Mutex<BTreeSet<String>>>,
}

impl Probe {
    /// The execution counter of `node`.
    pub fn counter(&self, node: &str) -> Arc<AtomicUsize> {
        self.runs
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default()
            .clone()
    }

    /// How many times `node` has started.
    pub fn runs(&self, node: &str) -> usize {
        self.counter(node).load(Ordering::SeqCst)
    }

    /// Every node's count, for readable assertions.
    pub fn all_runs(&self) -> BTreeMap<String, usize> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::SeqCst)))
            .collect()
    }

    /// Makes `node` fail until `heal`.
    pub fn break_node(&self, node: &str) {
        self.broken.lock().unwrap().insert(node.to_string());
    }

    pub fn heal(&self, node: &str) {
        self.broken.lock().unwrap().remove(node);
    }

    fn is_broken(&self, node: &str) -> bool {
        self.broken.lock().unwrap().contains(node)
    }

    /// A node that counts its run, fails while broken, and otherwise appends its name.
    pub fn appender(&self, name: &str) -> NodeFn {
        let counter = self.counter(name);
        let probe = self.clone();
        let name = name.to_string();
        Box::new(move |_state, _ctx| {
            let run = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let broken = probe.is_broken(&name);
            let name = name.clone();
            Box::pin(async move {
                if broken {
                    return Err(NodeError::new(format!("{name} is broken (run {run})")));
                }
                Ok(entries(&[&name]))
            })
        })
    }
}

/// `START -> names[0] -> ... -> names[n-1] -> END`, each node an appender.
pub fn linear(probe: &Probe, names: &[&str]) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::named("linear");
    for name in names {
        g.add_node(*name, probe.appender(name));
    }
    g.add_edge(START, names[0]);
    for pair in names.windows(2) {
        g.add_edge(pair[0], pair[1]);
    }
    g.add_edge(names[names.len() - 1], END);
    g
}

/// `START -> split -> (w0, w1, w2) -> join -> END`: the workers run in one superstep.
pub fn fan_out(probe: &Probe) -> StateGraph<Log> {
    let workers = ["w0", "w1", "w2"];
    let mut g = StateGraph::<Log>::named("fan_out");
    g.add_node("split", probe.appender("split"));
    for w in workers {
        g.add_node(w, probe.appender(w));
        g.add_edge("split", w);
    }
    g.add_node("join", probe.appender("join"));
    g.add_edge(START, "split");
    g.add_join(workers, "join");
    g.add_edge("join", END);
    g
}

/// One node that appends its name and loops until the log holds `len` entries.
pub fn looping(probe: &Probe, len: usize) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::named("looping");
    g.add_node("tick", probe.appender("tick"));
    g.add_edge(START, "tick");
    g.add_conditional_edges(
        "tick",
        move |s: &Log| if s.steps.len() < len { "tick" } else { END },
        ["tick", END],
    );
    g
}

/// The thread's checkpoint ids, newest first.
pub async fn checkpoint_ids(graph: &CompiledGraph<Log>, thread: &str) -> Vec<CheckpointId> {
    let all = HistoryQuery {
        limit: usize::MAX,
        ..Default::default()
    };
    graph
        .history(thread, all)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.checkpoint_id)
        .collect()
}

/// `["a", "b"]` as owned strings, for comparing with a state's log.
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A graph whose one node appends a 100-byte message per step until there are `len`.
pub fn chat(len: usize) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("agent", |_s: Arc<Log>, _c: Context| async {
        Ok::<_, NodeError>(LogUpdate::default().steps(vec!["x".repeat(100)]))
    });
    g.add_edge(START, "agent");
    g.add_conditional_edges(
        "agent",
        move |s: &Log| if s.steps.len() < len { "agent" } else { END },
        ["agent", END],
    );
    g
}
