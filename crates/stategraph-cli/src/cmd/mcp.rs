//! `graph mcp`: the registered graphs and the store's threads as Model Context Protocol tools
//! (see stategraph-mcp-server), over stdio for a client that starts it, or over streamable
//! HTTP with `--addr`, until the client closes stdin, Ctrl+C or SIGTERM.
//!
//! Threads are the CLI's: a run started here keeps its record of how it started, so
//! `graph resume` continues it, and a thread started by `graph run` resumes here with its
//! graph file and `--set` overrides. A thread is held only while a run of it goes, then let go.
//! In stdio mode stdout is the protocol: this command writes to stderr only (`say!` and the
//! log both go there).

use super::serve::stopped;
use crate::args::McpArgs;
use crate::error::{bad_input, EXIT_DONE};
use crate::origin::Origin;
use crate::store::Store;
use crate::{parse_overrides, Ctx};
use stategraph_mcp_server::{KeeperError, McpServer, McpServerError, ThreadKeeper};
use stategraph_registry::{Registry, Resolved};
use std::sync::Arc;

/// `graph mcp`.
pub(crate) async fn mcp(ctx: &Ctx, args: McpArgs) -> anyhow::Result<u8> {
    let keeper = CliThreads {
        store: ctx.store.clone(),
        registry: ctx.registry.clone(),
    };
    let server = McpServer::new(ctx.registry.clone(), ctx.checkpointer())
        .keeping_threads_with(Arc::new(keeper));
    let graphs: Vec<String> = ctx.registry.iter().map(|f| f.name().to_string()).collect();
    let offered = format!("{} graphs ({})", graphs.len(), graphs.join(", "));
    match args.addr {
        None => {
            if !ctx.quiet {
                say!(
                    "serving {offered} over MCP on stdio; threads in {}",
                    ctx.store.place()
                );
            }
            server.serve_stdio(stopped()).await?;
        }
        Some(addr) => {
            let bound = server.bind(addr).await.map_err(|e| match e {
                McpServerError::NotLoopback { .. } => bad_input(e.to_string()),
                other => other.into(),
            })?;
            say!("serving {offered} over MCP at {}", bound.url());
            say!("threads in {}; stop with Ctrl+C", ctx.store.place());
            bound.serve(stopped()).await?;
            say!("stopped");
        }
    }
    Ok(EXIT_DONE)
}

/// The CLI's part in a thread the server runs: its record of how it started, and holding the
/// thread only while a run of it goes.
struct CliThreads {
    store: Store,
    registry: Registry,
}

/// anyhow's chain of causes in one message, for the client to read.
fn said(e: anyhow::Error) -> KeeperError {
    format!("{e:#}").into()
}

#[async_trait::async_trait]
impl ThreadKeeper for CliThreads {
    async fn started(&self, thread: &str, graph: &Resolved) -> Result<(), KeeperError> {
        // As `graph run` records it: the graph file's absolute path, else the registered name.
        let file = match &graph.path {
            Some(path) => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .to_string_lossy()
                .into_owned(),
            None => graph.file.graph.clone(),
        };
        let origin = Origin::new(&graph.file.graph, &file, Vec::new());
        self.store.create(thread, &origin).await.map_err(said)
    }

    async fn taking(&self, thread: &str) -> Result<(), KeeperError> {
        self.store.hold(thread).await.map_err(|e| said(e.into()))
    }

    async fn graph_of(&self, thread: &str) -> Result<Option<Resolved>, KeeperError> {
        let Some(origin) = self.store.read_origin(thread).await.map_err(said)? else {
            return Ok(None);
        };
        let overrides = parse_overrides(&origin.overrides).map_err(said)?;
        let resolved = self
            .registry
            .resolve(&origin.graph_file, &overrides)
            .map_err(|e| said(anyhow::Error::from(e)))?;
        Ok(Some(resolved))
    }

    fn idle(&self, thread: &str) -> Result<(), KeeperError> {
        self.store.release(thread).map_err(|e| said(e.into()))
    }
}
