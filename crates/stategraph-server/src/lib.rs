//! An HTTP server for the graphs of a [`Registry`], in the shape of LangGraph's Agent Server API,
//! so LangGraph's own client libraries (`langgraph-sdk`) drive stategraph threads unchanged.
//!
//! ```no_run
//! # async fn demo(registry: stategraph_registry::Registry) -> Result<(), stategraph_server::ServerError> {
//! use std::sync::Arc;
//! use stategraph::checkpoint::MemoryCheckpointer;
//! use stategraph_server::{Server, ServerConfig};
//! let server = Server::new(registry, Arc::new(MemoryCheckpointer::new()));
//! let bound = server.bind(ServerConfig::default()).await?;
//! println!("serving on http://{}", bound.local_addr());
//! bound.serve(std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - `config.rs`: what a server is started with (address, token, CORS origins, body limit) and
//!   the refusal to listen beyond loopback without a token.
//! - `app.rs`: what every request shares: the store, the assistants, the server's record of
//!   each thread, the live runs, the hook that lets a quiet thread go and the one that takes a
//!   thread before a run reads it (a request's claim on the thread keeps the first off it).
//! - `assistants.rs`: the registered graphs as assistants (one per graph, built once over the
//!   store); below `threads.rs` and `runs/`, which read a thread's graph from it.
//! - `routes/`: one file per resource: `assistants.rs`, `threads.rs` (create, get, search,
//!   patch, copy, delete), `state.rs` (state, edits, history), `runs.rs` (create, stream, wait,
//!   join, list), `cancel.rs` (one run, or many), `plan.rs` (a plan kept by the thread's graph,
//!   read and edited), `retention.rs` (the owner's background retention sweep, when it runs one), `store.rs` (the
//!   long-term store the runs' nodes reach, for clients: items, search, namespaces), and, not
//!   LangGraph's, `cost.rs` (what a thread paid), `artifacts.rs` (its files listed and read),
//!   `fork.rs` (a new thread from any checkpoint).
//!   Each handler carries its `#[utoipa::path]` and is registered from it, so the OpenAPI
//!   document served at `/openapi.json` is made from the routes themselves.
//! - `shapes.rs`: the JSON shapes of LangGraph that several routes share (checkpoints, a thread's
//!   state, interrupts, times).
//! - `runs/`: the runs of this process: `mod.rs` is the registry (one active run per thread, the
//!   others queued or refused), `plan.rs` reads a run request into what to run, `exec.rs` runs
//!   it, `log.rs` is a run's events kept in memory with their ids, so a stream rejoined with
//!   `Last-Event-ID`, and a late joiner, get every event exactly once; `ledger.rs` is the
//!   thread's recent runs kept in the store, from which a server that did not run a run (one
//!   restarted after a crash, another over the same database) answers for it: followed through
//!   its checkpoints while its process lives, else how it ended.
//! - `sse.rs`: engine events as Server-Sent Events (`values`, `updates`, `custom`, `debug`,
//!   `messages`, then `end`), and the streaming response over a run's log.
//! - `threads.rs`: the server's own record of a thread (metadata, graph, times), kept in the
//!   thread's journal under [`THREAD_RECORD_KEY`], read and written through its catalog.
//! - `artifacts.rs`: a thread's artifact files (stategraph-artifacts): written after each run
//!   and fork, listed, and read only from inside their version folder; `cost.rs`: what a
//!   thread paid for model calls (its state's usage ledger and, through stategraph-spend, what
//!   no ledger holds).
//! - `page.rs`: the web page at `/` (threads, a thread's steps and state, its live run,
//!   answering a pause, editing the plan, starting a run): `ui/index.html`, `ui/app.js` and
//!   `ui/style.css` compiled in, calling the same API.
//! - `auth.rs`: the bearer token, compared in constant time; `extract.rs`: request bodies and
//!   queries, whose errors name the field; `error.rs`: errors as JSON with a status.
//!
//! Invariant: the server knows the registry, the engine and the checkpoint contract, never a
//! backend or the CLI; what a backend needs when a thread goes quiet (the folder store lets it
//! go, so the CLI can take it) is a hook its owner passes in ([`Server::on_thread_idle`]), and so
//! is taking a thread before a run reads it ([`Server::on_thread_busy`]).

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod app;
mod artifacts;
mod assistants;
mod auth;
mod config;
mod cost;
mod error;
mod extract;
mod page;
mod routes;
mod runs;
mod shapes;
mod sse;
mod threads;

pub use config::{ServerConfig, DEFAULT_ADDR, DEFAULT_BODY_LIMIT};
pub use error::ApiError;
pub use threads::THREAD_RECORD_KEY;

use app::App;
use axum::serve::ListenerExt;
use stategraph::checkpoint::{CheckpointError, Checkpointer};
use stategraph_registry::Registry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Called with a thread's id when the server has stopped writing it for now (its runs ended, an
/// edit was saved, a thread it made has waited for a run [`LINGER`]): a store that holds threads
/// for the process writing them lets it go here. Called while the server admits no run, so it
/// must not wait for the file system (the folder store detaches the thread and closes it on a
/// blocking thread).
pub type IdleHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Called with a thread's id before the server reads a thread it is about to run: a store that
/// holds threads for the process writing them takes it here, so the run's reads and writes go to
/// the one store it opens (not to a private copy first). A thread that does not exist is no
/// error ([`CheckpointError::ThreadNotFound`] is ignored: the request's checks answer 404);
/// a thread another process runs is a 409.
///
/// [`CheckpointError::ThreadNotFound`]: stategraph::checkpoint::CheckpointError::ThreadNotFound
pub type BusyHook = Arc<
    dyn Fn(String) -> std::pin::Pin<Box<dyn Future<Output = Result<(), CheckpointError>> + Send>>
        + Send
        + Sync,
>;

/// How long a thread made with `POST /threads` stays taken (see [`BusyHook`]) waiting for its
/// first run, which then starts on the store its creation opened. A writer in another process
/// waits for it (a holder that runs nothing lets go within moments).
pub const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Listening beyond loopback needs a token, or anyone who reaches the port runs graphs.
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach it could run graphs \
         and read every thread. Give one with --token TOKEN (or GRAPH_TOKEN), or listen on \
         127.0.0.1"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A `--cors` origin that is not a valid header value.
    #[error("--cors {origin}: not a valid origin (e.g. http://localhost:5173)")]
    BadOrigin {
        /// The origin given.
        origin: String,
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
    /// Serving failed.
    #[error("the server stopped: {0}")]
    Serve(#[source] std::io::Error),
}

/// The graphs of a registry and the store of their threads, ready to be served.
#[derive(Clone)]
pub struct Server {
    app: Arc<App>,
}

impl Server {
    /// A server for the graphs of `registry` (each is an assistant whose id is its name), over
    /// the threads of `store`.
    pub fn new(registry: Registry, store: Arc<dyn Checkpointer>) -> Self {
        Server {
            app: Arc::new(App::new(registry, store, None)),
        }
    }

    /// Calls `hook` when the server stops writing a thread for now (see [`IdleHook`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let store = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    /// let server = stategraph_server::Server::new(Default::default(), store)
    ///     .on_thread_idle(|thread| tracing::debug!(thread, "idle"));
    /// # let _ = server;
    /// ```
    pub fn on_thread_idle(self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.rebuilt(|app| app.idle = Some(Arc::new(hook)))
    }

    /// Calls `hook` before the server reads a thread to run it (see [`BusyHook`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let store = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    /// let server = stategraph_server::Server::new(Default::default(), store)
    ///     .on_thread_busy(|thread| async move {
    ///         tracing::debug!(thread, "about to run");
    ///         Ok(())
    ///     });
    /// # let _ = server;
    /// ```
    pub fn on_thread_busy<F, Fut>(self, hook: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), CheckpointError>> + Send + 'static,
    {
        let hook: BusyHook = Arc::new(move |thread| Box::pin(hook(thread)));
        self.rebuilt(|app| app.busy = Some(hook))
    }

    /// Gives its runs' nodes this long-term store (`ctx.store()`), as `graph run` gives its own.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use stategraph::checkpoint::store::MemoryStore;
    /// use stategraph::runtime::SharedStore;
    /// # let threads = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    /// let server = stategraph_server::Server::new(Default::default(), threads)
    ///     .with_long_term_store(SharedStore(Arc::new(MemoryStore::new())));
    /// # let _ = server;
    /// ```
    pub fn with_long_term_store(self, store: stategraph::runtime::SharedStore) -> Self {
        self.rebuilt(|app| app.long_term = Some(store))
    }

    /// Serves the progress of a background retention sweep its owner runs
    /// ([`stategraph_registry::Sweeper`]) at `GET /retention`; without one that route answers
    /// 404.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// # use stategraph_registry::{Registry, Sweeper};
    /// # async fn demo() {
    /// let threads = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    /// let sweeper = Sweeper::new(Registry::new(), threads.clone(), Duration::from_secs(3600)).spawn();
    /// let server = stategraph_server::Server::new(Registry::new(), threads)
    ///     .with_retention(sweeper.status());
    /// # let _ = server;
    /// # }
    /// ```
    pub fn with_retention(
        self,
        status: tokio::sync::watch::Receiver<stategraph_registry::SweeperStatus>,
    ) -> Self {
        self.rebuilt(|app| app.retention = Some(status))
    }

    /// The same server with one part changed (before it serves: its state is made anew).
    fn rebuilt(self, change: impl FnOnce(&mut App)) -> Self {
        let old = &self.app;
        let mut app = App::new(
            old.assistants.registry.clone(),
            old.store.clone(),
            old.idle.clone(),
        );
        app.long_term = old.long_term.clone();
        app.busy = old.busy.clone();
        app.retention = old.retention.clone();
        change(&mut app);
        Server { app: Arc::new(app) }
    }

    /// The HTTP routes with `config`'s token, CORS and body limit applied, for a program that
    /// serves them itself.
    pub fn router(&self, config: &ServerConfig) -> Result<axum::Router, ServerError> {
        artifacts::configure(&self.app, config);
        routes::router(self.app.clone(), config)
    }

    /// Checks `config` and binds its address (port 0 picks a free one).
    pub async fn bind(&self, config: ServerConfig) -> Result<Bound, ServerError> {
        config.check()?;
        let router = self.router(&config)?;
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: config.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.addr,
            source,
        })?;
        Ok(Bound {
            listener,
            router,
            addr,
            app: self.app.clone(),
        })
    }
}

/// A server bound to its address, not serving yet.
pub struct Bound {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    addr: SocketAddr,
    app: Arc<App>,
}

impl Bound {
    /// The address it listens on (with the port picked when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes; then runs still going are cancelled (each keeps its
    /// last checkpoint), their streams end, and their threads are let go.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let app = self.app.clone();
        // Open streams end only when their runs do: the runs are cancelled first, or a graceful
        // shutdown would wait for them.
        let stop = async move {
            shutdown.await;
            app.runs.cancel_all();
        };
        // Nagle's algorithm would hold a stream's next event until the client acknowledged the
        // last one, and clients delay acknowledgements: each event would wait for that delay.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not send a connection's writes without delay");
            }
        });
        let result = axum::serve(listener, self.router)
            .with_graceful_shutdown(stop)
            .await
            .map_err(ServerError::Serve);
        self.app.runs.wait_all().await;
        result
    }
}
