//! What a failure means, in the words a person needs to mend it: which host did not answer,
//! which user was refused, which database is missing. Errors name where they connected
//! ([`Target`]), never the password.

use deadpool_postgres::{PoolError, TimeoutType};
use stategraph_checkpoint::CheckpointError;
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// Why [`PostgresCheckpointer::connect`](crate::PostgresCheckpointer::connect) failed.
///
/// Each says what failed; turned into a [`CheckpointError`] it becomes its `Storage` variant
/// with the same text.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection string does not parse.
    #[error("invalid Postgres connection string: {reason}")]
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// No server answered: the host is down or unreachable, nothing listens on the port, or
    /// the name does not resolve.
    #[error("cannot reach Postgres at {target}: {reason}")]
    Unreachable {
        /// Host and port (or socket) tried.
        target: String,
        /// What the network said.
        reason: String,
    },
    /// The server refused the user (wrong password, unknown user, no `pg_hba.conf` entry).
    #[error(
        "Postgres at {target} refused user `{user}`: {reason}; check the user name and password \
         in the connection string"
    )]
    Auth {
        /// Host and port (or socket).
        target: String,
        /// The user that was refused.
        user: String,
        /// What the server said.
        reason: String,
    },
    /// The server runs, but not the database named.
    #[error(
        "database `{database}` does not exist on Postgres at {target}: create it (`createdb \
         {database}`, or `CREATE DATABASE`) or name another one in the connection string"
    )]
    NoDatabase {
        /// Host and port (or socket).
        target: String,
        /// The database asked for.
        database: String,
    },
    /// TLS could not be set up (`sslmode=require` against a server without TLS, or a failed
    /// handshake).
    #[error("TLS with Postgres at {target} failed: {reason}")]
    Tls {
        /// Host and port (or socket).
        target: String,
        /// What failed.
        reason: String,
    },
    /// The database was migrated by a newer stategraph: this build does not know its tables.
    /// Nothing was changed.
    #[error(
        "the stategraph tables in database `{database}` are at schema version {found}, newer \
         than this build of stategraph-postgres knows (version {supported}): upgrade stategraph \
         to a release that knows schema {found}, or point it at another database"
    )]
    SchemaTooNew {
        /// The database.
        database: String,
        /// Its schema version.
        found: u32,
        /// The newest this build knows ([`SCHEMA_VERSION`](crate::SCHEMA_VERSION)).
        supported: u32,
    },
    /// The tables could not be created or migrated (most often: the user may not create
    /// tables in the database's schema).
    #[error("cannot create or migrate the stategraph tables in database `{database}`: {reason}")]
    Schema {
        /// The database.
        database: String,
        /// What the server said.
        reason: String,
    },
    /// Anything else the server or the pool said.
    #[error("Postgres at {target} failed: {reason}")]
    Other {
        /// Host and port (or socket).
        target: String,
        /// What failed.
        reason: String,
    },
}

impl From<ConnectError> for CheckpointError {
    fn from(e: ConnectError) -> Self {
        CheckpointError::Storage(e.to_string())
    }
}

/// Where a handle connects, as its errors name it: hosts and ports, database, user.
#[derive(Debug)]
pub(crate) struct Target {
    hosts: Vec<String>,
    database: String,
    user: String,
    connect_timeout: Duration,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address(), self.database)
    }
}

impl Target {
    pub(crate) fn of(config: &tokio_postgres::Config) -> Self {
        let ports = config.get_ports();
        let port = |i: usize| match ports {
            [] => 5432,
            [one] => *one,
            many => many.get(i).copied().unwrap_or(5432),
        };
        let mut hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                tokio_postgres::config::Host::Tcp(name) => format!("{name}:{}", port(i)),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(dir) => {
                    format!("{}/.s.PGSQL.{}", dir.display(), port(i))
                }
            })
            .collect();
        if hosts.is_empty() {
            hosts = config
                .get_hostaddrs()
                .iter()
                .enumerate()
                .map(|(i, addr)| format!("{addr}:{}", port(i)))
                .collect();
        }
        let user = config.get_user().unwrap_or_default().to_string();
        Target {
            hosts,
            database: config
                .get_dbname()
                .map(str::to_string)
                .unwrap_or_else(|| user.clone()),
            user,
            connect_timeout: config
                .get_connect_timeout()
                .copied()
                .unwrap_or(Duration::from_secs(1)),
        }
    }

    /// The hosts and ports (or sockets) tried.
    pub(crate) fn address(&self) -> String {
        if self.hosts.is_empty() {
            "(no host given)".to_string()
        } else {
            self.hosts.join(",")
        }
    }

    pub(crate) fn database(&self) -> &str {
        &self.database
    }

    pub(crate) fn connect_timeout(&self) -> &Duration {
        &self.connect_timeout
    }

    /// What a failed first connection means.
    pub(crate) fn connect_error(&self, e: PoolError) -> ConnectError {
        let target = self.address();
        match e {
            PoolError::Backend(e) => self.classify(&e),
            PoolError::Timeout(TimeoutType::Create) => ConnectError::Unreachable {
                target,
                reason: "the server accepted the connection but did not finish the handshake \
                         in time (an overloaded server, or not a Postgres server on that port)"
                    .to_string(),
            },
            PoolError::Timeout(TimeoutType::Wait) => ConnectError::Other {
                target,
                reason: "every connection of the pool stayed busy".to_string(),
            },
            other => ConnectError::Other {
                target,
                reason: other.to_string(),
            },
        }
    }

    /// A pool failure while the store is in use.
    pub(crate) fn pool_error(&self, e: PoolError) -> CheckpointError {
        match e {
            PoolError::Backend(e) => self.query_error(&e),
            other => self.connect_error(other).into(),
        }
    }

    /// A failed statement while the store is in use.
    pub(crate) fn query_error(&self, e: &tokio_postgres::Error) -> CheckpointError {
        match e.code() {
            Some(code) if *code == SqlState::DISK_FULL => CheckpointError::DiskFull {
                path: format!("database `{}` at {}", self.database, self.address()),
            },
            // A connection error in mid-use (the server went away) reads as one at connect.
            _ if e.as_db_error().is_none() && io_cause(e).is_some() => self.classify(e).into(),
            _ => CheckpointError::Storage(format!("Postgres at {self}: {}", describe(e))),
        }
    }

    fn classify(&self, e: &tokio_postgres::Error) -> ConnectError {
        let target = self.address();
        if let Some(db) = e.as_db_error() {
            let reason = db.message().to_string();
            let code = db.code();
            return if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                ConnectError::Auth {
                    target,
                    user: self.user.clone(),
                    reason,
                }
            } else if *code == SqlState::INVALID_CATALOG_NAME {
                ConnectError::NoDatabase {
                    target,
                    database: self.database.clone(),
                }
            } else {
                ConnectError::Other {
                    target,
                    reason: describe(e),
                }
            };
        }
        if let Some(io) = io_cause(e) {
            let reason = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    "connection refused: nothing listens there (is Postgres running, and on \
                     this port?)"
                        .to_string()
                }
                std::io::ErrorKind::TimedOut => format!(
                    "no answer within {} ms (the host is down, or a firewall drops the packets)",
                    self.connect_timeout.as_millis()
                ),
                std::io::ErrorKind::NotFound => {
                    "no server socket there (is Postgres running?)".to_string()
                }
                _ => io.to_string(),
            };
            return ConnectError::Unreachable { target, reason };
        }
        let text = e.to_string();
        if text.contains("TLS") {
            ConnectError::Tls {
                target,
                reason: describe(e),
            }
        } else if text.contains("password missing") {
            ConnectError::Auth {
                target,
                user: self.user.clone(),
                reason: "the server asks for a password and the connection string has none"
                    .to_string(),
            }
        } else {
            ConnectError::Other {
                target,
                reason: describe(e),
            }
        }
    }
}

/// The I/O error under a client error, if the network failed.
fn io_cause(e: &tokio_postgres::Error) -> Option<&std::io::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = s.source();
    }
    None
}

/// A client error in one line: the server's message and code, or the client's chain of causes.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(": ");
            text.push_str(detail);
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
