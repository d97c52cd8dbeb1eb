//! What a server is started with, and the refusal to listen beyond loopback without a token.

use super::ServerError;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// `127.0.0.1:8123`, LangGraph's `langgraph dev` port, so its clients' examples work as they are.
pub const DEFAULT_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8123);

/// The largest request body taken, in bytes (a run's input, an edit): 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 16 << 20;

/// How a server listens and whom it lets in.
///
/// ```
/// use stategraph_server::ServerConfig;
/// let config = ServerConfig {
///     addr: "0.0.0.0:8123".parse().unwrap(),
///     token: Some("s3cret".into()),
///     ..ServerConfig::default()
/// };
/// assert!(config.check().is_ok());
/// assert!(ServerConfig { token: None, ..config }.check().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen; port 0 picks a free one.
    pub addr: SocketAddr,
    /// The bearer token every request must carry (`Authorization: Bearer TOKEN`, or
    /// `x-api-key: TOKEN` as LangGraph's clients send it). Required beyond loopback.
    pub token: Option<String>,
    /// Origins a browser may call the API from; none: CORS stays off.
    pub cors: Vec<String>,
    /// The largest request body taken, in bytes.
    pub body_limit: usize,
    /// Where the artifact version folders of a thread that has none go when a run of the
    /// server writes its graph's artifacts (absolute; `graph serve` gives `--out`, by default
    /// `output/` in its folder). `None`: only threads that already have folders (made by
    /// `graph run`) get their files written.
    pub artifacts_dir: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: DEFAULT_ADDR,
            token: None,
            cors: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            artifacts_dir: None,
        }
    }
}

impl ServerConfig {
    /// Refuses an address beyond loopback without a token (an empty token is none).
    pub fn check(&self) -> Result<(), ServerError> {
        let has_token = self.token.as_deref().is_some_and(|t| !t.is_empty());
        if !self.addr.ip().is_loopback() && !has_token {
            return Err(ServerError::TokenRequired { addr: self.addr });
        }
        Ok(())
    }
}
