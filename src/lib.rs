//! stategraph: explicit, durable state graphs for LLM agents.
//!
//! A graph is typed nodes over a typed state, joined by static and conditional edges. The
//! engine runs it in supersteps and saves a checkpoint after each, so a run that is paused,
//! killed or cut off resumes from its last step without redoing finished work.
//!
//! # Layout
//! - [`state`]: the state trait, per-field reducers, how a superstep's updates merge, and why a
//!   value a person wrote does not fit, in JSON's words.
//! - `error.rs`: the engine's errors (graph, node, resume, run), public through [`graph`] and
//!   [`runtime`].
//! - `run/`: a run's vocabulary without its machinery: settings, a node's context (with its
//!   handle on the long-term store, whose writes are saved with the step), events, thread
//!   paths, snapshots and the view of a subgraph, a run's control (drain) and a task's
//!   heartbeat (idle timeouts); public through [`runtime`].
//! - [`graph`]: building a graph (nodes, edges, joins, routers, Send), validating and drawing it.
//! - [`runtime`]: the superstep loop, thread operations (inspect, edit, fork, replay), and
//!   subgraphs (graphs as nodes, checkpointed under a namespace of their parent's thread, read,
//!   edited and forked through it).
//!
//! Modules depend one way, each on those listed before it: `state` <- `error` <- `run` <-
//! `graph` <- `runtime`. A graph's nodes take a run's `Context` and return a `NodeError`, so
//! those live below `graph`; the runtime runs graphs, so it sits above.
//! - [`functional`]: the functional API: a plain async function with durable, journaled
//!   `task` calls (`entrypoint`), made into a one-node graph; built on `graph` and `run`.
//! - [`quote`]: a value a person gave, quoted in a message (cut when long); used by every layer.
//! - [`checkpoint`]: the storage contract (`stategraph-checkpoint`, re-exported): what every
//!   backend implements, the records it moves, and the in-memory backend; and the long-term
//!   store's contract (`checkpoint::store`), which nodes reach through `Context::store`.
//!
//! The layers above the engine are crates of their own: backends (`stategraph-sled`), models and
//! tools (`stategraph-llm`, `stategraph-tools`), agent parts (`stategraph-prebuilt`,
//! `stategraph-spend`), artifacts, the registry, the built-in agents and the CLI; ARCHITECTURE.md
//! has the map. Data flows one way: the engine knows the checkpoint contract, never a backend,
//! and nothing above it.

// Library code never prints: what a user sees goes through the CLI's output layer
// (stategraph-cli's output.rs), and everything else is returned to the caller or sent as an
// event. Every library crate of the workspace denies the same.
#![deny(clippy::print_stdout, clippy::print_stderr)]

extern crate self as stategraph;

mod error;
pub mod functional;
pub mod graph;
pub mod quote;
mod run;
pub mod runtime;
pub mod state;

/// The checkpoint contract ([`stategraph_checkpoint`]), re-exported so a graph's author and a
/// backend's see the same types under one name.
pub use stategraph_checkpoint as checkpoint;

pub use graph::{Command, CompiledGraph, Goto, Route, Send, StateGraph, END, START};
pub use runtime::{Context, NodeError, RunConfig, RunError};
pub use state::State;
pub use stategraph_derive::{Keyed, State};

#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use serde_json;
}
