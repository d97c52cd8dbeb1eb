//! A thread's record of how it was started: the graph as given to `graph run` and its `--set`
//! overrides, kept in the thread's journal beside its checkpoints (an earlier version of this
//! layout kept it in the thread folder's `meta.json`).
//!
//! The `graph` command writes and uses it (`cli/origin.rs` says what it is for). It is read here
//! as well because the listing of threads, derived from the stores and cached in their index,
//! must say when it is damaged: a thread whose record does not read cannot be resumed or changed
//! until `graph repair` writes it again, and the listing is where people look for that. Reading
//! it while the store is open for the listing anyway costs one journal read per listed store.

use super::super::error::CheckpointError;
use super::super::Checkpointer;
use super::index::{Damage, ThreadListing};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The journal key the origin is kept under. Journal keys written by nodes start with a
/// checkpoint id, so this one cannot collide with them, and pruning keeps it.
pub(crate) const ORIGIN_KEY: &str = "graph/origin";

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OriginUnreadable {
    /// Which record, for people: the journal entry and its store, or the legacy `meta.json`.
    pub record: String,
    /// The file that holds it (the store's directory, or the `meta.json`).
    pub file: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads the origin of `thread`: from its journal in `store` (whose directory is `store_dir`),
/// else from the legacy `meta.json` at `legacy_meta`. `Ok(Ok(None))` when neither has one (a
/// thread another program wrote); `Ok(Err(_))` when one is there but does not read; `Err(_)`
/// when the store itself cannot be read.
pub(super) async fn read_origin(
    store: &dyn Checkpointer,
    thread: &str,
    store_dir: &Path,
    legacy_meta: &Path,
) -> Result<Result<Option<Origin>, OriginUnreadable>, CheckpointError> {
    let in_journal = |reason: String| OriginUnreadable {
        record: format!(
            "journal entry `{ORIGIN_KEY}` of the store {}",
            store_dir.display()
        ),
        file: store_dir.display().to_string(),
        reason,
    };
    match store.get_journal(thread, ORIGIN_KEY).await {
        // A record whose bytes fail their check: the same damage, said the same way.
        Err(e @ CheckpointError::Corrupt { .. }) => return Ok(Err(in_journal(e.to_string()))),
        Err(e) => return Err(e),
        Ok(Some(value)) => {
            return Ok(serde_json::from_value(value).map(Some).map_err(|e| {
                in_journal(format!("it is not a record of how a thread started ({e})"))
            }))
        }
        Ok(None) => {}
    }
    let legacy = |reason: String| OriginUnreadable {
        record: legacy_meta.display().to_string(),
        file: legacy_meta.display().to_string(),
        reason,
    };
    let meta = match read_legacy_meta(legacy_meta, thread) {
        Ok(Some(meta)) => meta,
        Ok(None) => return Ok(Ok(None)),
        Err(CheckpointError::Damaged { reason, .. }) => return Ok(Err(legacy(reason))),
        Err(e) => return Err(e),
    };
    Ok(serde_json::from_value(meta)
        .map(Some)
        .map_err(|e| legacy(format!("it does not say how the thread started ({e})"))))
}

/// The `meta.json` at `path` of a thread written by an earlier version of this layout: `None`
/// when there is none, [`CheckpointError::Damaged`] (naming it) when it cannot be read.
pub(super) fn read_legacy_meta(
    path: &Path,
    thread: &str,
) -> Result<Option<serde_json::Value>, CheckpointError> {
    let damaged = |reason: String| CheckpointError::Damaged {
        thread: thread.to_string(),
        file: path.display().to_string(),
        reason,
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(damaged(format!("its meta.json cannot be read: {e}"))),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| damaged(format!("its meta.json is not JSON: {e}")))
}

/// Lists a thread whose origin record does not read as damaged (unless it is listed as damaged
/// already, which says more). Reads only; a store that cannot be read leaves the listing as it
/// was (whoever reads the store next says why).
pub(super) async fn with_origin_checked(
    listing: Option<ThreadListing>,
    store: &dyn Checkpointer,
    store_dir: &Path,
    legacy_meta: &Path,
) -> Option<ThreadListing> {
    let mut listing = listing?;
    if listing.damage.is_some() {
        return Some(listing);
    }
    let read = read_origin(store, &listing.thread_id, store_dir, legacy_meta).await;
    if let Ok(Err(unreadable)) = read {
        listing.damage = Some(Damage {
            file: unreadable.file,
            reason: format!(
                "its record of how it was started ({}) cannot be read: {}; its checkpoints \
                 read, but it is not resumed or changed without it",
                unreadable.record, unreadable.reason
            ),
            lost_checkpoints: false,
        });
    }
    Some(listing)
}
