//! Tools from Model Context Protocol servers, for stategraph agents: the servers a run names
//! under `[settings.mcp.servers.NAME]` are started (a child process over stdio, or a streamable
//! HTTP endpoint), their tools listed and offered to the model beside the built-in tools, each
//! an ordinary [`Tool`](stategraph_tools::Tool), so the tool node that runs built-in tools runs
//! these the same way: journaled by tool-call id (a call that finished is never made again on
//! resume), with approval pauses when asked for. It speaks MCP through the official Rust SDK,
//! `rmcp`.
//!
//! ```no_run
//! use stategraph_mcp::{McpSettings, McpTools};
//! use stategraph_tools::Toolbox;
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let settings: McpSettings = serde_json::from_value(serde_json::json!({
//!     "servers": {"fs": {"command": "mcp-server-filesystem", "args": ["./ws"]}}
//! }))?;
//! let mcp = McpTools::connect(&settings).await?;
//! let tools = Toolbox::new(mcp.tools()); // `fs__read_file`, `fs__write_file`, ...
//! # Ok(()) }
//! ```
//!
//! What fails, and how it shows: a server that does not start, or does not list its tools, is
//! an error of [`McpTools::connect`] naming it (with its last stderr lines); a call that times
//! out, meets a protocol error, or whose server stops under it, is the tool's error result the
//! model reads, naming server and tool; a server found stopped when called is restarted, once
//! per call. A child's stderr goes to the log (`tracing`), never to the terminal.
//!
//! # Layout
//! `settings.rs` the `[mcp.servers.NAME]` tables and their checks; `names.rs` a tool's wire
//! name (`fs__read_file`, what model APIs accept) and the name people read (`fs.read_file`);
//! `connection.rs` one server: start, initialize, list, call, restart; `handler.rs` what the
//! client says of itself; `stderr.rs` a child's stderr into the log; `content.rs` a call's
//! result as a tool message's text; `tools.rs` the tools as
//! [`Tool`](stategraph_tools::Tool)s and `approve_tools` entries resolved; `error.rs` what went
//! wrong, naming server and tool.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod connection;
mod content;
mod error;
mod handler;
pub mod names;
mod settings;
mod stderr;
mod tools;

pub use content::MAX_RESULT_CHARS;
pub use error::McpError;
pub use settings::{
    McpSettings, ServerSettings, DEFAULT_STARTUP_TIMEOUT_SECS, DEFAULT_TIMEOUT_SECS,
};
pub use tools::{McpTool, McpTools};
