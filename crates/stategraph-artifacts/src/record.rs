//! What a thread keeps about its artifacts, in its own store's journal (so it works with any
//! [`Checkpointer`] and goes wherever the thread goes):
//!
//! - `artifacts/versions`: the thread's run folders, which one is current, and whether the next
//!   write starts a new one;
//! - `{checkpoint}/artifacts`: the manifest of what was written for that checkpoint (paths,
//!   producing nodes, content hashes). Keys that start with a checkpoint id are pruned with it;
//! - `artifacts/last/{version}`: the newest manifest written into that version's folder, which
//!   is what an edit is measured against;
//! - `artifacts/writing/{version}`: the hashes of the files a write is about to put there,
//!   recorded first, so files of a checkpoint that was then lost are never taken for edits.

use super::error::ArtifactError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{CheckpointId, Checkpointer};
use std::collections::BTreeMap;
use std::path::PathBuf;

const VERSIONS_KEY: &str = "artifacts/versions";

/// One version folder of a thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFolder {
    /// Its label (`v3`, `v0.0.3`).
    pub label: String,
    /// Its number.
    pub number: u32,
    /// Where it is (absolute).
    pub dir: PathBuf,
    /// Why it was made: `run`, `rerun --from NODE`, `fork of THREAD`, `new version`.
    pub reason: String,
    /// When (ms since the epoch).
    pub created_at_ms: u64,
}

/// The next folder a thread writes into, when it is to be a new one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// Where version folders go.
    pub base: PathBuf,
    /// Why the new version is made.
    pub reason: String,
}

/// The thread's run folders.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Versions {
    pub folders: Vec<RunFolder>,
    /// The label of the folder writes go to.
    pub current: Option<String>,
    /// Set when the next write is to open a new version folder.
    pub pending: Option<Pending>,
}

impl Versions {
    pub(crate) fn current(&self) -> Option<&RunFolder> {
        let label = self.current.as_ref()?;
        self.folders.iter().find(|f| &f.label == label)
    }

    pub(crate) fn labels(&self) -> String {
        if self.folders.is_empty() {
            "none yet".to_string()
        } else {
            self.folders
                .iter()
                .map(|f| f.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// One written file, as a checkpoint records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileRecord {
    /// The artifact it belongs to.
    pub artifact: String,
    /// The node that produces it.
    pub node: String,
    /// BLAKE3 of its content, hex.
    pub hash: String,
    /// Its size.
    pub len: u64,
    /// The step whose state first had this content.
    pub step: u64,
    /// The node(s) whose writes made that step (its checkpoint's writers, `, `-joined): who
    /// last changed the file. `None` in manifests written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
}

/// What was written into a version folder for one checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub version: String,
    pub checkpoint: CheckpointId,
    pub step: u64,
    /// By path relative to the run folder.
    pub files: BTreeMap<String, FileRecord>,
}

/// The hashes of the files a write is about to put into a version folder, recorded (and
/// flushed) before the first of them is written. A checkpoint can be lost after its files were
/// written (async durability, a kill before the manifest): a file whose content is one of these
/// is the engine's own, never a person's edit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Writing {
    /// By path relative to the run folder: the contents (hashes) it may have been given.
    pub files: BTreeMap<String, Vec<String>>,
}

impl Writing {
    /// The hashes no manifest of the folder confirms (`last` is its newest): files a write
    /// may have left that no checkpoint is known to hold.
    pub(crate) fn unconfirmed(self, last: Option<&Manifest>) -> BTreeMap<String, Vec<String>> {
        self.files
            .into_iter()
            .filter_map(|(path, hashes)| {
                let confirmed = last.and_then(|m| m.files.get(&path)).map(|r| &r.hash);
                let open: Vec<String> = hashes
                    .into_iter()
                    .filter(|h| Some(h) != confirmed)
                    .collect();
                (!open.is_empty()).then_some((path, open))
            })
            .collect()
    }
}

fn writing_key(label: &str) -> String {
    format!("artifacts/writing/{label}")
}

pub(crate) async fn writing(
    store: &dyn Checkpointer,
    thread: &str,
    label: &str,
) -> Result<Writing, ArtifactError> {
    Ok(get(store, thread, &writing_key(label))
        .await?
        .unwrap_or_default())
}

pub(crate) async fn put_writing(
    store: &dyn Checkpointer,
    thread: &str,
    label: &str,
    w: &Writing,
) -> Result<(), ArtifactError> {
    put(store, thread, &writing_key(label), w).await
}

fn last_key(label: &str) -> String {
    format!("artifacts/last/{label}")
}

fn checkpoint_key(id: CheckpointId) -> String {
    format!("{id}/artifacts")
}

async fn get<T: DeserializeOwned>(
    store: &dyn Checkpointer,
    thread: &str,
    key: &str,
) -> Result<Option<T>, ArtifactError> {
    let Some(value) = store.get_journal(thread, key).await? else {
        return Ok(None);
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| ArtifactError::Record {
            thread: thread.to_string(),
            key: key.to_string(),
            message: e.to_string(),
        })
}

async fn put<T: Serialize>(
    store: &dyn Checkpointer,
    thread: &str,
    key: &str,
    value: &T,
) -> Result<(), ArtifactError> {
    let value = serde_json::to_value(value).map_err(|e| ArtifactError::Record {
        thread: thread.to_string(),
        key: key.to_string(),
        message: e.to_string(),
    })?;
    Ok(store.put_journal(thread, key, &value).await?)
}

pub(crate) async fn versions(
    store: &dyn Checkpointer,
    thread: &str,
) -> Result<Versions, ArtifactError> {
    Ok(get(store, thread, VERSIONS_KEY).await?.unwrap_or_default())
}

/// A thread's run folders, oldest first, and the label of the one written to now (`None`:
/// nothing written yet). A read: it changes nothing, on disk or in the store.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = stategraph::checkpoint::MemoryCheckpointer::new();
/// let (folders, current) = stategraph_artifacts::run_folders(&store, "t1").await.unwrap();
/// assert!(folders.is_empty() && current.is_none());
/// # }
/// ```
pub async fn run_folders(
    store: &dyn Checkpointer,
    thread: &str,
) -> Result<(Vec<RunFolder>, Option<String>), ArtifactError> {
    let v = versions(store, thread).await?;
    Ok((v.folders, v.current))
}

pub(crate) async fn put_versions(
    store: &dyn Checkpointer,
    thread: &str,
    v: &Versions,
) -> Result<(), ArtifactError> {
    put(store, thread, VERSIONS_KEY, v).await
}

pub(crate) async fn last_manifest(
    store: &dyn Checkpointer,
    thread: &str,
    label: &str,
) -> Result<Option<Manifest>, ArtifactError> {
    get(store, thread, &last_key(label)).await
}

/// Records a manifest with its checkpoint, then as its folder's newest (in that order: a crash
/// between the two leaves the folder's previous manifest, and its files are still told apart
/// from edits by the checkpoint's rendering).
pub(crate) async fn put_manifest(
    store: &dyn Checkpointer,
    thread: &str,
    m: &Manifest,
) -> Result<(), ArtifactError> {
    put(store, thread, &checkpoint_key(m.checkpoint), m).await?;
    put(store, thread, &last_key(&m.version), m).await
}
