//! How a thread was started: the graph as given to `run` and its `--set` overrides, kept in the
//! thread's own store (its journal), so `resume`, `state` and the rest build the same graph.
//!
//! It is the one thing the CLI stores beside the checkpoints, and it is stored with them, not in
//! an index: whatever lists threads is derived from the stores.
//!
//! A record that is there but cannot be read is damage, never "no record": read as missing, a
//! resume would run without the thread's `--set` overrides and then store a record without
//! them. Commands that change the thread refuse it; `state` and `history` warn and read what
//! is intact; `graph repair` writes a new one, saying what it lost.

use crate::checkpoint::{now_ms, CheckpointError, Checkpointer, FolderCheckpointer};
use serde::{Deserialize, Serialize};

/// The journal key the origin is kept under. Journal keys written by nodes start with a
/// checkpoint id, so this one cannot collide with them, and pruning keeps it.
const ORIGIN_KEY: &str = "graph/origin";

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
     changed without it: `graph repair {thread}` keeps a backup of the thread and writes the \
     record again from its checkpoints (the graph they name, without --set overrides: give \
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
    pub(crate) async fn read(
        store: &FolderCheckpointer,
        thread: &str,
    ) -> anyhow::Result<Option<Origin>> {
        let damaged = |record: String, reason: String| OriginDamaged {
            thread: thread.to_string(),
            record,
            reason,
        };
        let stored = match store.get_journal(thread, ORIGIN_KEY).await {
            Ok(stored) => stored,
            // A record whose bytes fail their check: the same damage, said the same way.
            Err(e @ CheckpointError::Corrupt { .. }) => {
                let record = Self::journal_entry(store, thread);
                return Err(damaged(record, e.to_string()).into());
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(value) = stored {
            return serde_json::from_value(value).map(Some).map_err(|e| {
                let record = Self::journal_entry(store, thread);
                damaged(
                    record,
                    format!("it is not a record of how a thread started ({e})"),
                )
                .into()
            });
        }
        let meta = match store.legacy_meta(thread) {
            Ok(meta) => meta,
            Err(CheckpointError::Damaged { file, reason, .. }) => {
                return Err(damaged(file, reason).into())
            }
            Err(e) => return Err(e.into()),
        };
        let Some(meta) = meta else {
            return Ok(None);
        };
        serde_json::from_value(meta).map(Some).map_err(|e| {
            let file = store.legacy_meta_path(thread).display().to_string();
            damaged(
                file,
                format!("it does not say how the thread started ({e})"),
            )
            .into()
        })
    }

    fn journal_entry(store: &FolderCheckpointer, thread: &str) -> String {
        format!(
            "journal entry `{ORIGIN_KEY}` of the store {}",
            store.store_path(thread).display()
        )
    }

    /// Stores it with the thread (flushed).
    pub(crate) async fn write(
        &self,
        store: &FolderCheckpointer,
        thread: &str,
    ) -> Result<(), CheckpointError> {
        let value = serde_json::to_value(self).map_err(CheckpointError::storage)?;
        store.put_journal(thread, ORIGIN_KEY, &value).await
    }
}
