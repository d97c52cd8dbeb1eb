//! A store's files copied into a fresh temporary directory, to be opened there: sled 0.34 has
//! no read-only mode and writes a store it opens, so a reader (`read_copy.rs`) and the blob
//! checks, which ask sled itself how it would open a store (`blobs.rs`), both open copies.
//!
//! The copy goes to the temporary directory, or to `/dev/shm` when that fails (a full disk):
//! reading must work when the disk is full.

use super::layout::{copy_linking_blobs, copy_tree};
use stategraph_checkpoint::CheckpointError;
use std::path::{Path, PathBuf};

/// Copies a store into a fresh temporary directory (as `<tmp>/store`).
pub(super) fn copy_to_temp(store_dir: &Path) -> Result<tempfile::TempDir, CheckpointError> {
    to_temp(store_dir, |from, to| copy_tree(from, to).map(drop))
}

/// Copies a store into a fresh temporary directory (as `<tmp>/store`), its blob files
/// hard-linked where the directory is on the store's file system
/// ([`copy_linking_blobs`]): for a copy that is only read, whose blobs sled never rewrites.
pub(super) fn link_to_temp(store_dir: &Path) -> Result<tempfile::TempDir, CheckpointError> {
    to_temp(store_dir, copy_linking_blobs)
}

/// A store's files put into a fresh temporary directory (as `<tmp>/store`) by `fill`.
fn to_temp(
    store_dir: &Path,
    fill: impl Fn(&Path, &Path) -> std::io::Result<()>,
) -> Result<tempfile::TempDir, CheckpointError> {
    let mut last = None;
    for parent in temp_parents() {
        let attempt = tempfile::Builder::new()
            .prefix("stategraph-read-")
            .tempdir_in(&parent)
            .and_then(|dir| {
                let copy = dir.path().join("store");
                std::fs::create_dir(&copy)?;
                fill(store_dir, &copy)?;
                Ok(dir)
            });
        match attempt {
            Ok(dir) => return Ok(dir),
            Err(e) => last = Some((parent, e)),
        }
    }
    let (parent, e) = last.unwrap_or_else(|| {
        (
            std::env::temp_dir(),
            std::io::Error::other("no temporary directory"),
        )
    });
    Err(CheckpointError::Storage(format!(
        "cannot copy the store at {} to read it (into {}): {e}",
        store_dir.display(),
        parent.display()
    )))
}

fn temp_parents() -> Vec<PathBuf> {
    let mut parents = vec![std::env::temp_dir()];
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() && !parents.contains(&shm) {
        parents.push(shm);
    }
    parents
}
