//! [`McpServer`]: what every session shares, and serving it over stdio or streamable HTTP.

use crate::error::McpServerError;
use crate::handler::Handler;
use crate::keeper::{NoKeeper, ThreadKeeper};
use crate::shared::Shared;
use crate::Registry;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use stategraph_checkpoint::Checkpointer;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The path of the streamable HTTP endpoint: `http://ADDR/mcp`.
pub const MCP_PATH: &str = "/mcp";

/// The graphs of a registry and the threads of a store, ready to be offered to MCP clients.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl McpServer {
    /// A server for the graphs of `registry` (a `run_NAME` tool each), over the threads of
    /// `store`.
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>) -> Self {
        McpServer {
            shared: Arc::new(Shared::new(
                registry,
                store,
                Arc::new(NoKeeper),
                CancellationToken::new(),
            )),
        }
    }

    /// Tells `keeper` of each thread started, asks it for a thread's graph, and tells it when
    /// a thread goes quiet (see [`ThreadKeeper`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Mine;
    /// # impl stategraph_mcp_server::ThreadKeeper for Mine {}
    /// # let store = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    /// let server = stategraph_mcp_server::McpServer::new(Default::default(), store)
    ///     .keeping_threads_with(Arc::new(Mine));
    /// # let _ = server;
    /// ```
    pub fn keeping_threads_with(self, keeper: Arc<dyn ThreadKeeper>) -> Self {
        let old = &self.shared;
        McpServer {
            shared: Arc::new(Shared::new(
                old.registry.clone(),
                old.store.clone(),
                keeper,
                old.stop.clone(),
            )),
        }
    }

    /// Serves one client on this process's stdin and stdout until it closes them or
    /// `shutdown` completes; then runs still going stop at a step boundary, keeping their last
    /// checkpoint, and this returns once they have. Nothing else may write to stdout
    /// meanwhile: it is the protocol.
    pub async fn serve_stdio(
        &self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), McpServerError> {
        let handler = Handler::new(self.shared.clone());
        tokio::pin!(shutdown);
        let running = tokio::select! {
            served = handler.serve(rmcp::transport::stdio()) => {
                served.map_err(|e| McpServerError::Handshake(e.to_string()))?
            }
            () = &mut shutdown => return Ok(()),
        };
        let session = running.cancellation_token();
        let result = tokio::select! {
            quit = running.waiting() => {
                quit.map(drop).map_err(|e| McpServerError::Serve(std::io::Error::other(e)))
            }
            () = &mut shutdown => {
                session.cancel();
                Ok(())
            }
        };
        self.shared.stop.cancel();
        self.shared.idle().await;
        result
    }

    /// Binds the streamable HTTP endpoint ([`MCP_PATH`]) at `addr` (port 0 picks a free one);
    /// loopback only, as it has no authentication.
    pub async fn bind(&self, addr: SocketAddr) -> Result<Bound, McpServerError> {
        if !addr.ip().is_loopback() {
            return Err(McpServerError::NotLoopback { addr });
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| McpServerError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| McpServerError::Bind { addr, source })?;
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = self.shared.stop.child_token();
        let shared = self.shared.clone();
        let service = StreamableHttpService::new(
            move || Ok(Handler::new(shared.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Ok(Bound {
            listener,
            router: axum::Router::new().nest_service(MCP_PATH, service),
            addr: local,
            shared: self.shared.clone(),
        })
    }

    /// Stops the runs going: each at its next step boundary, keeping its last checkpoint.
    pub fn stop_runs(&self) {
        self.shared.stop.cancel();
    }
}

/// The HTTP endpoint bound to its address, not serving yet.
pub struct Bound {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Bound {
    /// The address it listens on (with the port picked when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's URL, for a client's configuration: `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Serves until `shutdown` completes; then runs still going stop at a step boundary,
    /// keeping their last checkpoint, and their calls answer how far they got.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpServerError> {
        let stop = self.shared.stop.clone();
        let stopping = async move {
            shutdown.await;
            stop.cancel();
        };
        let served = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(stopping)
            .await
            .map_err(McpServerError::Serve);
        self.shared.stop.cancel();
        self.shared.idle().await;
        served
    }
}
