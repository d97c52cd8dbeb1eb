//! What this client tells a server about itself when a session starts.

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::ClientHandler;

/// The client side of a session: named `stategraph`, offering no capability (no roots,
/// sampling or elicitation), so a server works from its own arguments (the filesystem server,
/// from the folders it was given). MCP's logging notifications are not asked for (the protocol
/// deprecates them); a stdio server's stderr is what reaches the log.
#[derive(Clone, Copy, Default)]
pub(crate) struct Client;

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("stategraph", env!("CARGO_PKG_VERSION")),
        )
    }
}
