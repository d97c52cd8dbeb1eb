//! What a node returns and what a router chooses: updates, destinations, and Send invocations.

use crate::checkpoint::{GotoRecord, SendRecord};
use crate::state::State;
use serde::{Deserialize, Serialize};

/// The name of the virtual first node. Edges from `START` choose the first superstep.
pub const START: &str = "__start__";
/// The name of the virtual last node. Routing to `END` ends that branch of the run.
pub const END: &str = "__end__";

/// One invocation of a node with its own input, for map-reduce: a router (or a node's command)
/// returns N of these and the node runs N times in the next superstep, in this order.
///
/// The node reads the argument with [`Context::arg`](crate::run::context::Context::arg); it still
/// sees the whole shared state too.
///
/// ```
/// use stategraph::Send;
/// let jobs: Vec<Send> = ["a", "b"].iter().map(|doc| Send::new("summarise", doc)).collect();
/// assert_eq!(jobs[1].arg, serde_json::json!("b"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Send {
    /// The node to invoke.
    pub node: String,
    /// Its input, as JSON (it is saved with the checkpoint's frontier).
    pub arg: serde_json::Value,
}

impl Send {
    /// Invokes `node` with `arg`. An argument that cannot be turned into JSON becomes `null`;
    /// use [`Send::try_new`] to see that error instead.
    pub fn new(node: impl Into<String>, arg: impl Serialize) -> Self {
        Send {
            node: node.into(),
            arg: serde_json::to_value(arg).unwrap_or(serde_json::Value::Null),
        }
    }

    /// Invokes `node` with `arg`, failing if `arg` cannot be turned into JSON.
    pub fn try_new(
        node: impl Into<String>,
        arg: impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Send {
            node: node.into(),
            arg: serde_json::to_value(arg)?,
        })
    }
}

/// One destination chosen by a router or a node command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Goto {
    /// Run this node in the next superstep (at most once per step, however many ask).
    Node(String),
    /// Run a node with its own input (map-reduce); every Send is its own task.
    Send(Send),
    /// End this branch.
    End,
}

impl From<&str> for Goto {
    fn from(name: &str) -> Self {
        if name == END {
            Goto::End
        } else {
            Goto::Node(name.to_string())
        }
    }
}

impl From<String> for Goto {
    fn from(name: String) -> Self {
        Goto::from(name.as_str())
    }
}

impl From<Send> for Goto {
    fn from(send: Send) -> Self {
        Goto::Send(send)
    }
}

/// Where a router sends the run next: one or more destinations.
///
/// ```
/// use stategraph::{Route, Send, END};
/// let one: Route = "review".into();
/// let done: Route = END.into();
/// let both: Route = vec!["a", "b"].into();
/// let mapped: Route = vec![Send::new("work", 1), Send::new("work", 2)].into();
/// assert_eq!(both.targets().len(), 2);
/// # let _ = (one, done, mapped);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route(pub Vec<Goto>);

impl Route {
    /// The chosen destinations, in order.
    pub fn targets(&self) -> &[Goto] {
        &self.0
    }
}

impl<T: Into<Goto>> From<T> for Route {
    fn from(goto: T) -> Self {
        Route(vec![goto.into()])
    }
}

impl<T: Into<Goto>> From<Vec<T>> for Route {
    fn from(gotos: Vec<T>) -> Self {
        Route(gotos.into_iter().map(Into::into).collect())
    }
}

/// What a node returns: an update to the state, and optionally where to go next.
///
/// A plain update converts into a command (`#[derive(State)]` writes that `From`), so most nodes
/// just return their update. Destinations given here add to the node's static and conditional
/// edges; they must be declared with [`NodeSpec::destinations`](crate::graph::NodeSpec::destinations)
/// so the graph can be validated and drawn.
#[derive(Debug)]
pub struct Command<S: State> {
    /// The node's write to the state.
    pub update: S::Update,
    /// Extra destinations for the next superstep.
    pub goto: Vec<Goto>,
}

impl<S: State> Clone for Command<S> {
    fn clone(&self) -> Self {
        Command {
            update: self.update.clone(),
            goto: self.goto.clone(),
        }
    }
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Command {
            update: S::Update::default(),
            goto: Vec::new(),
        }
    }
}

impl<S: State> Command<S> {
    /// A command that only updates the state.
    pub fn from_update(update: S::Update) -> Self {
        Command {
            update,
            goto: Vec::new(),
        }
    }

    /// A command that writes nothing.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Adds destinations for the next superstep.
    pub fn goto(mut self, route: impl Into<Route>) -> Self {
        self.goto.extend(route.into().0);
        self
    }
}

impl From<&Goto> for GotoRecord {
    fn from(goto: &Goto) -> Self {
        match goto {
            Goto::Node(node) => GotoRecord::Node(node.clone()),
            Goto::Send(send) => GotoRecord::Send(SendRecord {
                node: send.node.clone(),
                arg: send.arg.clone(),
            }),
            Goto::End => GotoRecord::End,
        }
    }
}

impl From<GotoRecord> for Goto {
    fn from(record: GotoRecord) -> Self {
        match record {
            GotoRecord::Node(node) => Goto::Node(node),
            GotoRecord::Send(SendRecord { node, arg }) => Goto::Send(Send { node, arg }),
            GotoRecord::End => Goto::End,
        }
    }
}

/// The stored form of a command's destinations.
pub(crate) fn goto_records(goto: &[Goto]) -> Vec<GotoRecord> {
    goto.iter().map(GotoRecord::from).collect()
}

/// A command's destinations read back from their stored form.
pub(crate) fn gotos_of(records: &[GotoRecord]) -> Vec<Goto> {
    records.iter().cloned().map(Goto::from).collect()
}
