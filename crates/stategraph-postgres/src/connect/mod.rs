//! Connecting: the options, the pool, and the first connection, which creates or migrates the
//! schema so that a wrong host, password or database is reported by `connect`, not by a run's
//! first step. `failure.rs` says what a failure means; `tls.rs` is TLS for `sslmode=require`.

pub(crate) mod failure;
mod tls;

pub use failure::ConnectError;
pub(crate) use failure::{describe, Target};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::time::Duration;

/// How to reach the database, and how long to wait for it.
///
/// ```
/// use std::time::Duration;
/// use stategraph_postgres::PostgresOptions;
/// let options = PostgresOptions::new("postgres://app@db.internal/agents")
///     .pool_size(4)
///     .connect_timeout(Duration::from_secs(3));
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct PostgresOptions {
    url: String,
    pool_size: usize,
    connect_timeout: Duration,
    handshake_timeout: Duration,
    dead_peer_timeout: Duration,
}

impl std::fmt::Debug for PostgresOptions {
    // The URL may hold a password: it is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("dead_peer_timeout", &self.dead_peer_timeout)
            .finish_non_exhaustive()
    }
}

impl PostgresOptions {
    /// Options for the database at `url`: a `postgres://` URL or a `key=value` string, as
    /// libpq takes them (`sslmode` `disable`, `prefer` or `require`; `connect_timeout` in
    /// seconds overrides [`connect_timeout`](Self::connect_timeout)).
    pub fn new(url: impl Into<String>) -> Self {
        PostgresOptions {
            url: url.into(),
            // Runs of one process write one step at a time each; a handful of connections
            // serve many, and every worker of a fleet opens its own pool.
            pool_size: 8,
            connect_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(5),
            dead_peer_timeout: Duration::from_secs(30),
        }
    }

    /// Connections the pool keeps at most (8 by default).
    pub fn pool_size(mut self, connections: usize) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// How long to wait for the server to accept a connection (1 s by default), unless the
    /// URL sets `connect_timeout`: a host that does not answer is reported after this long.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a new connection may take from the first packet to ready, TLS and
    /// authentication included (5 s by default): a server that accepts and then says nothing
    /// is reported after this long.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How long a request may go unacknowledged by the server's machine before its connection
    /// is given up (30 s by default; Linux's `TCP_USER_TIMEOUT`), unless the URL sets
    /// `tcp_user_timeout`: a server that vanished from the network fails the call instead of
    /// hanging it.
    pub fn dead_peer_timeout(mut self, timeout: Duration) -> Self {
        self.dead_peer_timeout = timeout;
        self
    }
}

/// Builds the pool and takes its first connection, which brings the schema up to date.
pub(crate) async fn open(options: &PostgresOptions) -> Result<(Pool, Target), ConnectError> {
    let mut config: tokio_postgres::Config =
        options
            .url
            .parse()
            .map_err(|e: tokio_postgres::Error| ConnectError::InvalidUrl {
                // tokio-postgres names the option that failed, never the password.
                reason: e.to_string(),
            })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(options.dead_peer_timeout);
    }
    if config.get_application_name().is_none() {
        config.application_name("stategraph");
    }
    let target = Target::of(&config);
    let tls = tls::connector().map_err(|reason| ConnectError::Tls {
        target: target.address(),
        reason,
    })?;
    let manager = Manager::from_config(
        config,
        tls,
        ManagerConfig {
            // A connection the server closed is dropped; a live one is reused as it is.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let handshake = options
        .handshake_timeout
        .max(*target.connect_timeout())
        .max(Duration::from_millis(100));
    let pool = Pool::builder(manager)
        .max_size(options.pool_size)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(handshake))
        .recycle_timeout(Some(handshake))
        .build()
        .map_err(|e| ConnectError::Other {
            target: target.address(),
            reason: e.to_string(),
        })?;
    let mut client = pool.get().await.map_err(|e| target.connect_error(e))?;
    crate::schema::migrate(&mut client, &target).await?;
    Ok((pool, target))
}
