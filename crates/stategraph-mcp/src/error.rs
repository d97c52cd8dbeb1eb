//! What can go wrong with an MCP server, each naming the server (and the tool, for a call).
//!
//! Starting and listing fail a run's step ([`McpTools::connect`](crate::McpTools::connect)
//! returns them); a call's failure reaches the model as the tool's error result, in these words.

/// Why a server or one of its tools could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// A server's settings cannot work.
    #[error("MCP server `{server}`: {message}")]
    Setting {
        /// The server's name.
        server: String,
        /// What is wrong and what to set instead.
        message: String,
    },
    /// A stdio server's command is neither a file nor a program on `PATH`.
    #[error(
        "MCP server `{server}`: the command `{command}` was not found (neither a file nor a \
         program on PATH); install it or give its full path in `command`"
    )]
    CommandNotFound {
        /// The server's name.
        server: String,
        /// Its `command`.
        command: String,
    },
    /// The server did not start, did not complete MCP's initialization, or did not list its
    /// tools.
    #[error("MCP server `{server}` did not start: {detail}")]
    NotStarted {
        /// The server's name.
        server: String,
        /// Why, with the last lines it wrote to stderr when it is a child process.
        detail: String,
    },
    /// `approve_tools` names a tool no server offers.
    #[error("approve_tools: `{entry}` {message}")]
    Approval {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
    /// A call did not finish in time (it was cancelled).
    #[error(
        "MCP server `{server}` did not answer the call of `{tool}` within {secs}s (its \
         `timeout_secs`); the call was cancelled"
    )]
    TimedOut {
        /// The server's name.
        server: String,
        /// The tool, as the server names it.
        tool: String,
        /// The limit.
        secs: u64,
    },
    /// The server exited (or its connection closed) while it ran the call.
    #[error(
        "MCP server `{server}` stopped while it ran `{tool}` ({detail}); {after}. The call \
         may or may not have taken effect: check before calling it again"
    )]
    Crashed {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// How it ended (exit status, last stderr lines).
        detail: String,
        /// Whether it was restarted for the next call.
        after: String,
    },
    /// The server was down when called and could not be started again.
    #[error("MCP server `{server}` is down and could not be restarted to call `{tool}`: {detail}")]
    Unavailable {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// Why the restart failed.
        detail: String,
    },
    /// The server answered the call with a protocol error (JSON-RPC error).
    #[error("MCP server `{server}` refused the call of `{tool}`: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// The server's error, with its code.
        message: String,
    },
}
