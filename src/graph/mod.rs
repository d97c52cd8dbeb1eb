//! Building graphs: nodes, edges, routers, validation, and drawing.
//!
//! [`StateGraph`] collects nodes and edges; [`StateGraph::compile`] validates them (with
//! petgraph) into a [`CompiledGraph`], which the runtime runs.
//!
//! # Layout
//! - `command.rs`: what a node returns besides an update (`Command`, `Goto`, `Send`, `Route`).
//! - `node.rs`: the `Node` trait, closures as nodes, and a node's options (timeout, retries).
//! - `builder.rs`: `StateGraph`, which collects nodes, edges, joins and routers.
//! - `validate.rs` and `compiled.rs`: `compile` checks a builder and indexes it into a
//!   `CompiledGraph`.
//! - `cache_policy.rs`: a node's cache policy (`CachePolicy`: key and time to live).
//! - `on_error.rs`: a node's error handler (`OnError`), the `NodeFailure` it writes into the
//!   state, and the check that its field can hold one.
//! - `subgraphs.rs`: the graphs a node declares it runs, declared and read back.
//! - `draw.rs`: Mermaid and DOT.
//!
//! Invariant: this module describes graphs; it never runs them and knows nothing of storage
//! backends (a compiled graph only holds an `Arc<dyn Checkpointer>` to hand to the runtime).
//! What a node is handed and returns while it runs (`Context`, `NodeError`, `SubgraphView`)
//! comes from below (the crate's `run/` and `error.rs`); the runtime, above, runs the graphs.

mod builder;
mod cache_policy;
mod command;
mod compiled;
pub(crate) mod draw;
mod node;
mod on_error;
mod subgraphs;
mod validate;

pub use crate::error::GraphError;
pub use builder::{RouterFn, RouterSpec, StateGraph};
pub use cache_policy::{CacheKeyFn, CachePolicy};
pub(crate) use command::{goto_records, gotos_of};
pub use command::{Command, Goto, Route, Send, END, START};
pub use compiled::CompiledGraph;
pub(crate) use compiled::{Target, Topology};
pub use draw::DrawOptions;
pub use node::{
    FnMarker, IntoNode, Node, NodeMarker, NodeOptions, NodeSpec, RetryPolicy, RetryPredicate,
};
pub(crate) use on_error::failure_update;
pub use on_error::{NodeFailure, OnError};
