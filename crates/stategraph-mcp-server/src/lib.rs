//! The graphs of a [`Registry`] and the threads of a store, offered to Model Context Protocol
//! clients (editors, chat clients, agents) as tools, over stdio or streamable HTTP, through the
//! official Rust SDK (`rmcp`). A run that pauses for a person returns its questions and its
//! thread; the client answers later, in the same session or another, and the thread goes on
//! from its last checkpoint, never paying twice for a step it saved.
//!
//! ```no_run
//! # async fn demo(registry: stategraph_registry::Registry) -> Result<(), stategraph_mcp_server::McpServerError> {
//! use std::sync::Arc;
//! use stategraph::checkpoint::MemoryCheckpointer;
//! use stategraph_mcp_server::McpServer;
//! let server = McpServer::new(registry, Arc::new(MemoryCheckpointer::new()));
//! // stdout is the protocol: nothing else may write to it.
//! server.serve_stdio(std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! # Tools
//! - `run_<graph>` for each registered graph: starts a run on a new thread; its arguments are
//!   the run's input, described by the graph's input schema ([`input_schema`]).
//! - `resume_thread`: continues a thread, answering its pause (`thread_id`, `answer`).
//! - `read_thread`: a thread's state, where it stands and what it waits for.
//! - `list_threads`: every thread of the store, newest first.
//!
//! A run's result is structured content (thread, status, questions or output) and the same in
//! words; its progress goes out as progress notifications when the request carried a progress
//! token. What went wrong with a call (an input that does not fit, naming the field; a thread
//! busy or unknown) is a tool error the client shows, never a protocol error.
//!
//! # Layout
//! - `server.rs`: [`McpServer`] and serving it over stdio or HTTP ([`Bound`]); `shared.rs`:
//!   what every session shares (registry, store, keeper, the threads running here).
//! - `handler.rs`: the protocol's side: the server's description, `tools/list`, `tools/call`
//!   dispatched to the jobs below.
//! - `tools.rs`: the tools as a client sees them (names, descriptions, schemas) and a call's
//!   arguments read into what to do, each mistake naming its argument.
//! - `runs.rs`: starting and resuming runs: the checks before a thread is made, one run per
//!   thread in this process, events as progress notifications, the graph's verdict kept.
//! - `threads.rs`: reading a thread and listing the store's threads.
//! - `reply.rs`: how a run ended, a thread's state and a listing, as structured content and
//!   text.
//! - `keeper.rs`: [`ThreadKeeper`], what the store's owner keeps beside a thread (how it was
//!   started; letting it go when idle), so threads here are the same a command line sees.
//! - `error.rs`: [`McpServerError`] (serving) and the tool errors a client reads.
//!
//! Invariant: knows the registry, the engine and the checkpoint contract, never a backend, the
//! command line or an agent; writes nothing to stdout but the protocol.
//!
//! [`input_schema`]: stategraph_registry::input_schema

// Library code never prints, and in stdio mode stdout is the protocol.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod handler;
mod keeper;
mod reply;
mod runs;
mod server;
mod shared;
mod threads;
mod tools;

pub use error::McpServerError;
pub use keeper::{KeeperError, ThreadKeeper};
pub use server::{Bound, McpServer, MCP_PATH};
pub use tools::{LIST_THREADS, READ_THREAD, RESUME_THREAD, RUN_PREFIX};

use stategraph_registry::Registry;
