//! The schema: created and migrated by the program, one version at a time, each version a SQL
//! file in `sql/` applied in one transaction and recorded in `stategraph_migrations`.
//!
//! Connecting reads the newest version applied (one query when the schema is current). A
//! database at an older version is migrated under an advisory lock, so two processes starting
//! together migrate it once; one at a newer version than this build is refused, untouched
//! ([`ConnectError::SchemaTooNew`]).

use crate::connect::failure::{describe, ConnectError, Target};
use deadpool_postgres::{GenericClient, Object};
use tokio_postgres::error::SqlState;

/// The newest schema version this build creates and reads.
pub const SCHEMA_VERSION: u32 = 6;

/// One version of the schema.
struct Migration {
    version: u32,
    what: &'static str,
    sql: &'static str,
}

/// Every version, oldest first. A released version is never edited: a change is a new one.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "threads with their leases, checkpoints, pending writes, journal, pieces, fence",
        sql: include_str!("sql/v1.sql"),
    },
    Migration {
        version: 2,
        what: "the run queue: runs, their leases, stops and outcomes",
        sql: include_str!("sql/v2.sql"),
    },
    Migration {
        version: 3,
        what: "the node cache: node results by graph, node and key",
        sql: include_str!("sql/v3.sql"),
    },
    Migration {
        version: 4,
        what: "the long-term store: items by namespace and key",
        sql: include_str!("sql/v4.sql"),
    },
    Migration {
        version: 5,
        what: "the run queue: active runs indexed by thread, for the claim",
        sql: include_str!("sql/v5.sql"),
    },
    Migration {
        version: 6,
        what: "a write of a thread in one statement: the fence's refusal as a function",
        sql: include_str!("sql/v6.sql"),
    },
];

/// Held while migrating, by every process that migrates this database ("stgraph" in ASCII).
const MIGRATION_LOCK: i64 = 0x7374_6772_6170_6801;

const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS stategraph_migrations (
    version    INTEGER PRIMARY KEY,
    what       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// Brings the database's schema to [`SCHEMA_VERSION`], or refuses a newer one.
pub(crate) async fn migrate(client: &mut Object, target: &Target) -> Result<(), ConnectError> {
    let fail = |e: tokio_postgres::Error| ConnectError::Schema {
        database: target.database().to_string(),
        reason: explain(&e),
    };
    let current = match applied(&*client).await {
        Ok(version) => version,
        // No table yet: a new database.
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => 0,
        Err(e) => return Err(fail(e)),
    };
    check_not_newer(current, target)?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = client.transaction().await.map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(fail)?;
    tx.batch_execute(VERSION_TABLE).await.map_err(fail)?;
    // Read again under the lock: another process may have migrated meanwhile.
    let current = applied(&tx).await.map_err(fail)?;
    check_not_newer(current, target)?;
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        tx.batch_execute(m.sql).await.map_err(fail)?;
        let version = i32::try_from(m.version).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO stategraph_migrations (version, what) VALUES ($1, $2)",
            &[&version, &m.what],
        )
        .await
        .map_err(fail)?;
        tracing::info!(database = %target, version = m.version, "migrated the stategraph schema");
    }
    tx.commit().await.map_err(fail)
}

/// The newest version applied.
async fn applied(client: &impl GenericClient) -> Result<u32, tokio_postgres::Error> {
    let row = client
        .query_one("SELECT max(version) FROM stategraph_migrations", &[])
        .await?;
    let version: Option<i32> = row.try_get(0)?;
    Ok(version.map_or(0, |v| u32::try_from(v).unwrap_or(0)))
}

fn check_not_newer(found: u32, target: &Target) -> Result<(), ConnectError> {
    if found > SCHEMA_VERSION {
        return Err(ConnectError::SchemaTooNew {
            database: target.database().to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// The server's words, and what to do when it is about privileges.
fn explain(e: &tokio_postgres::Error) -> String {
    let text = describe(e);
    if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        format!(
            "{text}; connect as a user that may create tables in the database's schema (its \
             owner), or grant this user CREATE on it"
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_numbered_from_one_without_gaps_up_to_the_current_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }
}
