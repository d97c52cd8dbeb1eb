//! Why serving failed ([`McpServerError`]), and what a tool call that went wrong tells its
//! client ([`ToolError`]): a message it shows, with every cause in it.

use std::net::SocketAddr;

/// Why the server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    /// The HTTP endpoint has no authentication: beyond loopback, anyone who reaches the port
    /// could run graphs and read every thread.
    #[error(
        "refusing to serve MCP on {addr}: the endpoint has no authentication, so anyone who \
         can reach it could run graphs and read every thread; listen on 127.0.0.1 (or [::1])"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound (in use, not ours).
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The client on stdio did not open a session (it sent something else first, or closed).
    #[error("the MCP client on stdin did not start a session: {0}")]
    Handshake(String),
    /// Serving failed.
    #[error("the MCP server stopped: {0}")]
    Serve(#[source] std::io::Error),
}

/// What a tool call that failed says to its client: what went wrong, each cause once, and
/// what to do when there is something to do.
#[derive(Debug)]
pub(crate) struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }

    /// A mistake in the argument `field`.
    pub fn argument(field: &str, message: impl std::fmt::Display) -> Self {
        ToolError(format!("argument `{field}`: {message}"))
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An error and its causes, each said once (a cause already in its parent's message is not
/// repeated).
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        source = cause.source();
    }
    text
}

macro_rules! tool_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for ToolError {
            fn from(e: $t) -> Self {
                ToolError(chain(&e))
            }
        }
    )*};
}

tool_error_from!(
    stategraph::runtime::RunError,
    stategraph_registry::RegistryError,
    stategraph_checkpoint::CheckpointError
);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("graph `memo`")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_are_said_once() {
        let e = Outer(std::io::Error::other("no model configured"));
        assert_eq!(chain(&e), "graph `memo`: no model configured");
    }
}
