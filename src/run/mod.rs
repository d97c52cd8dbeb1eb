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
//! - `control.rs`: [`RunControl`] (drain a run at its next step boundary) and a task's
//!   heartbeat, which a node's idle timeout watches (a node beats through its [`Context`]).
//! - `events.rs`: the [`Event`]s a run streams and the sink tasks send them through.
//! - `namespace.rs`: [`ThreadPath`], where a subgraph's checkpoints live inside its root thread.
//! - `store_link.rs`: [`SharedStore`], the long-term store a caller gives a run, and the link
//!   its tasks share, which knows which attempt of a task staged writes.
//! - `store.rs`: [`NodeStore`], a node's handle on the long-term store ([`Context::store`]),
//!   whose writes are staged with its task and saved with the step.
//! - `snapshot.rs`: [`StateSnapshot`] (a thread's state at a checkpoint) and [`SubgraphView`] (a
//!   child graph with its state type erased), which the runtime implements for every compiled
//!   graph.
//!
//! Invariant: names no graph type and runs nothing; the errors it returns are the crate's
//! (`error.rs`).
//!
//! [`RunConfig`]: crate::run::config::RunConfig
//! [`Context`]: crate::run::context::Context
//! [`Event`]: crate::run::events::Event
//! [`RunControl`]: crate::run::control::RunControl
//! [`ThreadPath`]: crate::run::namespace::ThreadPath
//! [`StateSnapshot`]: crate::run::snapshot::StateSnapshot
//! [`SubgraphView`]: crate::run::snapshot::SubgraphView
//! [`NodeStore`]: crate::run::store::NodeStore
//! [`SharedStore`]: crate::run::store_link::SharedStore
//! [`Context::store`]: crate::run::context::Context::store

pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod control;
pub(crate) mod events;
pub mod namespace;
pub(crate) mod snapshot;
pub(crate) mod store;
pub(crate) mod store_link;
