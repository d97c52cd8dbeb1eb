//! stategraph: explicit, durable state graphs for LLM agents.
//!
//! A graph is typed nodes over a typed state, joined by static and conditional edges. The
//! engine runs it in supersteps and saves a checkpoint after each, so a run that is paused,
//! killed or cut off resumes from its last step without redoing finished work.
//!
//! # Layout
//! - [`state`]: the state trait, per-field reducers, how a superstep's updates merge, and why a
//!   value a person wrote does not fit, in JSON's words.
//! - [`graph`]: building a graph (nodes, edges, joins, routers, Send), validating and drawing it.
//! - [`runtime`]: the superstep loop, node contexts, events, errors, thread operations
//!   (inspect, edit, fork, replay), and subgraphs (graphs as nodes, checkpointed under a
//!   namespace of their parent's thread, read, edited and forked through it).
//! - [`checkpoint`]: the storage contract, its in-memory and sled backends (one store, or a
//!   folder per thread as the CLI keeps them), integrity framing, and large snapshots kept as
//!   pieces that a thread's snapshots share.
//! - [`artifacts`]: parts of a run's state as files people read and edit: declared per graph,
//!   written after each checkpoint into a versioned run folder, checked, and read back as edits.
//! - [`llm`]: chat-model clients (OpenAI-compatible, Anthropic, a fake for tests), structured output.
//! - [`tools`]: web search, local corpus search, page fetch, the [`tools::Tool`] trait for tools
//!   a model calls.
//! - [`prebuilt`]: building blocks of tool-using agents: a messages field and its reducer, a
//!   tool node, the tools-condition router, and a prebuilt `agent(model, tools, options)` graph.
//! - [`registry`]: named graphs ([`registry::GraphFactory`]), the TOML graph files that configure
//!   them, and a state-erased graph with JSON in and out.
//! - [`agents`]: the example agents, one folder each, each registered by name.
//! - [`cli`]: the `graph` command as a library: [`cli::App`] parses arguments and runs a command;
//!   a user's binary registers its own graphs into it.
//!
//! Data flows one way: cli -> registry -> graph -> runtime -> checkpoint; agents sit between
//! the registry and the graph API. Nothing below knows what is above it.

// Library code never prints: what a user sees goes through the CLI's output layer
// (src/cli/output.rs), and everything else is returned to the caller or sent as an event.
#![deny(clippy::print_stdout, clippy::print_stderr)]

extern crate self as stategraph;

pub mod graph;
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
