//! How a thread was started: the graph as given to `run` and its `--set` overrides, kept in the
//! thread's own store (its journal), so `resume`, `state` and the rest build the same graph.
//!
//! It is the one thing the CLI stores beside the checkpoints, and it is stored with them, not in
//! an index: whatever lists threads is derived from the stores.
//!
//! A record that is there but cannot be read is damage, never "no record": read as missing, a
//! resume would run without the thread's `--set` overrides and then store a record without
//! them. Commands that change the thread refuse it; `state` and `history` warn and read what
//! is intact; `graph threads` lists the thread as damaged; `graph repair` writes a new one,
//! saying what it lost. The store is told of the record ([`RECORD`]) so that its listing,
//! cached in the stores' index, checks it; what the record means stays here.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{now_ms, CheckpointError, Checkpointer};
use stategraph_sled::RequiredRecord;

/// The journal key the origin is kept under (see ARCHITECTURE.md, "Journal keys").
pub(crate) const ORIGIN_KEY: &str = "graph/origin";

/// The origin as the stores check it for their listings (the directory store is told of it; the
/// Postgres listing checks it the same way, `store/postgres.rs`).
pub(crate) const RECORD: RequiredRecord = RequiredRecord {
    key: ORIGIN_KEY,
    what: "its record of how it was started",
    check: |value| {
        Origin::deserialize(value)
            .map(drop)
            .map_err(|e| format!("it is not a record of how a thread started ({e})"))
    },
};

/// How a thread was started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Origin {
    /// The registered graph.
    pub graph: String,
    /// The graph as given to `run`: a registered name or an absolute file path.
    pub graph_file: String,
    /// `--set` overrides given to `run` (and later commands), applied again on resume.
    #[serde(default)]
    pub overrides: Vec<String>,
    /// When the thread was started (ms since the epoch).
    pub created_at_ms: u64,
}

/// A thread's origin record that is there but cannot be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "the record of how thread `{thread}` was started (its graph file and --set overrides; \
     {record}) cannot be read: {reason}. Nothing was changed; the thread is not resumed or \
     changed without it: `graph repair {thread}` writes the record again from its checkpoints \
     (in a store directory, keeping a backup of the thread first) (the graph they name, without --set overrides: give \
     those again with `graph resume {thread} --set KEY=VALUE`)"
)]
pub(crate) struct OriginDamaged {
    pub thread: String,
    /// Where the record is: the journal entry and the store, or the legacy `meta.json`.
    pub record: String,
    pub reason: String,
}

impl Origin {
    pub(crate) fn new(graph: &str, graph_file: &str, overrides: Vec<String>) -> Self {
        Origin {
            graph: graph.to_string(),
            graph_file: graph_file.to_string(),
            overrides,
            created_at_ms: now_ms(),
        }
    }

    /// The thread's origin: as stored with it, else as an earlier version of the layout kept it
    /// (its `meta.json`); `None` when neither has one (a thread another program wrote). A record
    /// that does not read is an [`OriginDamaged`] error.
    pub(crate) async fn write_to(
        &self,
        saver: &dyn Checkpointer,
        thread: &str,
    ) -> Result<(), CheckpointError> {
        let value = serde_json::to_value(self).map_err(CheckpointError::storage)?;
        saver.put_journal(thread, ORIGIN_KEY, &value).await
    }
}
