//! The vocabulary of a run, without the machinery that runs one: what a node is handed while it
//! runs and what a caller configures, receives and reads back.
//!
//! It sits below `graph` because a graph's nodes speak it (`Node::run` takes a [`Context`] and
//! declares its subgraphs as [`SubgraphView`]s), and `runtime` runs those nodes, so putting it
//! in either one made the two import each other. Its items are public through
//! `stategraph::runtime`, where users find them; this module itself is private.
//!
//! # Layout
//! - `config.rs`: [`RunConfig`] (settings, durability, stream modes, limits).
//! - `context.rs`: [`Context`], a node's view of its run (ids, settings, its Send argument,
//!   events, interrupts, the journal of recorded calls); running a subgraph from it is the
//!   runtime's (`runtime/subgraph.rs`).
//! - `events.rs`: the [`Event`]s a run streams and the sink tasks send them through.
//! - `namespace.rs`: [`ThreadPath`], where a subgraph's checkpoints live inside its root thread.
//! - `snapshot.rs`: [`StateSnapshot`] (a thread's state at a checkpoint) and [`SubgraphView`] (a
//!   child graph with its state type erased), which the runtime implements for every compiled
//!   graph.
//!
//! Invariant: names no graph type and runs nothing; the errors it returns are the crate's
//! (`error.rs`).
//!
//! [`RunConfig`]: crate::runtime::RunConfig
//! [`Context`]: crate::runtime::Context
//! [`Event`]: crate::runtime::Event
//! [`ThreadPath`]: crate::runtime::ThreadPath
//! [`StateSnapshot`]: crate::runtime::StateSnapshot
//! [`SubgraphView`]: crate::runtime::SubgraphView

pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod events;
pub mod namespace;
pub(crate) mod snapshot;
