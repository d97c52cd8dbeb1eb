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
//! saying what it lost. The record's type and how it is read are the store's
//! (`checkpoint/folders/origin.rs`), so the listing, cached in the stores' index, can check it.

pub(crate) use crate::checkpoint::Origin;
use crate::checkpoint::{now_ms, CheckpointError, Checkpointer, FolderCheckpointer, ORIGIN_KEY};

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
        store.origin(thread).await?.map_err(|unreadable| {
            OriginDamaged {
                thread: thread.to_string(),
                record: unreadable.record,
                reason: unreadable.reason,
            }
            .into()
        })
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
