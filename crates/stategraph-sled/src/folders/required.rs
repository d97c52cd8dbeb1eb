//! A record a program keeps in each thread's journal and cannot do without: for the `graph`
//! command, its record of how a thread was started. The store does not know what the record
//! means; it is told its key, what to call it, and how to tell it reads
//! ([`RequiredRecord`]), because the listing of threads, derived from the stores and cached in
//! their index, must say when it is damaged: a thread whose record does not read cannot be
//! resumed or changed, and the listing is where people look for that. Reading it while the
//! store is open for the listing anyway costs one journal read per listed store.
//!
//! An earlier version of this layout kept the record in the thread folder's `meta.json`; it is
//! read from there when the journal has none.

use super::damage::Damage;
use super::index::ThreadListing;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::Checkpointer;
use std::path::Path;

/// A journal record every thread of a [`FolderCheckpointer`](super::FolderCheckpointer) must
/// have readable once it has one, given with
/// [`require_record`](super::FolderCheckpointer::require_record).
#[derive(Clone, Copy, Debug)]
pub struct RequiredRecord {
    /// Its journal key. Journal keys written by nodes start with a checkpoint id, so a key
    /// such as `app/record` cannot collide with them, and pruning keeps it.
    pub key: &'static str,
    /// What it is, for people: "its record of how it was started".
    pub what: &'static str,
    /// Whether a stored value reads as the record: `Err(why)` when it does not.
    pub check: fn(&serde_json::Value) -> Result<(), String>,
}

/// A required record that is there but cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordUnreadable {
    /// Which record, for people: the journal entry and its store, or the legacy `meta.json`.
    pub record: String,
    /// The file that holds it (the store's directory, or the `meta.json`).
    pub file: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads `required` of `thread`: from its journal in `store` (whose directory is `store_dir`),
/// else from the legacy `meta.json` at `legacy_meta`. `Ok(Ok(None))` when neither has one (a
/// thread another program wrote); `Ok(Err(_))` when one is there but does not read; `Err(_)`
/// when the store itself cannot be read.
pub(super) async fn read_required(
    required: &RequiredRecord,
    store: &dyn Checkpointer,
    thread: &str,
    store_dir: &Path,
    legacy_meta: &Path,
) -> Result<Result<Option<serde_json::Value>, RecordUnreadable>, CheckpointError> {
    let in_journal = |reason: String| RecordUnreadable {
        record: format!(
            "journal entry `{}` of the store {}",
            required.key,
            store_dir.display()
        ),
        file: store_dir.display().to_string(),
        reason,
    };
    match store.get_journal(thread, required.key).await {
        // A record whose bytes fail their check: the same damage, said the same way.
        Err(e @ CheckpointError::Corrupt { .. }) => return Ok(Err(in_journal(e.to_string()))),
        Err(e) => return Err(e),
        Ok(Some(value)) => {
            return Ok(match (required.check)(&value) {
                Ok(()) => Ok(Some(value)),
                Err(why) => Err(in_journal(why)),
            })
        }
        Ok(None) => {}
    }
    let legacy = |reason: String| RecordUnreadable {
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
    Ok(match (required.check)(&meta) {
        Ok(()) => Ok(Some(meta)),
        Err(why) => Err(legacy(why)),
    })
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

/// Lists a thread whose required record does not read as damaged (unless it is listed as damaged
/// already, which says more). Reads only; a store that cannot be read leaves the listing as it
/// was (whoever reads the store next says why).
pub(super) async fn with_required_checked(
    required: Option<&RequiredRecord>,
    listing: Option<ThreadListing>,
    store: &dyn Checkpointer,
    store_dir: &Path,
    legacy_meta: &Path,
) -> Option<ThreadListing> {
    let mut listing = listing?;
    let Some(required) = required else {
        return Some(listing);
    };
    if listing.damage.is_some() {
        return Some(listing);
    }
    let read = read_required(required, store, &listing.thread_id, store_dir, legacy_meta).await;
    if let Ok(Err(unreadable)) = read {
        listing.damage = Some(Damage {
            file: unreadable.file,
            reason: format!(
                "{} ({}) cannot be read: {}; its checkpoints read, but it is not resumed or \
                 changed without it",
                required.what, unreadable.record, unreadable.reason
            ),
            lost_checkpoints: false,
        });
    }
    Some(listing)
}
