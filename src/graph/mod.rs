//! Building graphs: nodes, edges, routers, validation, and drawing.
//!
//! [`StateGraph`] collects nodes and edges; [`StateGraph::compile`] validates them (with
//! petgraph) into a [`CompiledGraph`], which the runtime runs.
//!
//! Invariant: this module describes graphs; it never runs them and knows nothing of storage
//! backends (a compiled graph only holds an `Arc<dyn Checkpointer>` to hand to the runtime).

mod builder;
mod command;
mod compiled;
pub(crate) mod draw;
mod error;
mod node;
mod validate;

pub use builder::{RouterFn, RouterSpec, StateGraph};
pub(crate) use command::{goto_records, gotos_of};
pub use command::{Command, Goto, Route, Send, END, START};
pub use compiled::CompiledGraph;
pub(crate) use compiled::{Target, Topology};
pub use draw::DrawOptions;
pub use error::GraphError;
pub use node::{
    FnMarker, IntoNode, Node, NodeMarker, NodeOptions, NodeSpec, RetryPolicy, RetryPredicate,
};
