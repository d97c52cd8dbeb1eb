//! What Postgres adds to the conformance kit: fencing between workers (`fencing.rs`), the records
//! that broke other Postgres savers (`records.rs`), the schema's versions (`schema.rs`), the node cache (`cache.rs`), and what
//! a failed connection says (`connect.rs`). Each test runs on a database of its own in a real,
//! throwaway cluster.

#[path = "../support/mod.rs"]
mod support;

mod cache;
mod connect;
mod fencing;
mod queue;
mod records;
mod schema;

use serde::{Deserialize, Serialize};
use stategraph::State;
use stategraph_checkpoint::{
    now_ms, CheckpointId, CheckpointMetadata, CheckpointRecord, Frontier, Lease, Source, StateData,
};
use stategraph_postgres::PostgresCheckpointer;
use support::pg_cluster::TestDatabase;

/// The state of the graph tests: every node appends its name.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    #[state(append)]
    pub steps: Vec<String>,
}

/// A handle on the test's database, as one worker (one process) would open it.
async fn worker(db: &TestDatabase) -> PostgresCheckpointer {
    PostgresCheckpointer::connect(db.url()).await.unwrap()
}

/// A plain client on the test's database, to look at what is stored.
async fn psql(db: &TestDatabase) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A lease as a run on this machine takes it.
fn lease(owner: &str) -> Lease {
    Lease {
        owner: owner.to_string(),
        pid: std::process::id(),
        host: "this-host".to_string(),
        expires_at_ms: now_ms() + 60_000,
    }
}

/// A checkpoint whose state is a snapshot of `state`.
fn checkpoint(
    thread: &str,
    parent: Option<CheckpointId>,
    state: serde_json::Value,
) -> CheckpointRecord {
    CheckpointRecord {
        thread_id: thread.to_string(),
        id: uuid::Uuid::now_v7(),
        parent_id: parent,
        step: 0,
        state: StateData::Snapshot(serde_json::value::to_raw_value(&state).unwrap()),
        frontier: Frontier::default(),
        metadata: CheckpointMetadata {
            source: Source::Loop,
            writers: Vec::new(),
            created_at_ms: now_ms(),
            schema_version: 1,
            run_id: "run".to_string(),
            graph: None,
        },
    }
}

fn snapshot_of(record: &CheckpointRecord) -> serde_json::Value {
    match &record.state {
        StateData::Snapshot(raw) => serde_json::from_str(raw.get()).unwrap(),
        StateData::Delta(_) => panic!("a delta where a snapshot was written"),
    }
}
