//! Remembering that a store's disk failed.
//!
//! After a write that failed for lack of space, sled 0.34 can wait forever in its next flush (the
//! failed write leaves a buffer it still waits for; seen on a real full filesystem, where a run
//! then never ended and ignored Ctrl+C). So the first I/O failure is kept, and from then on the
//! store answers writes and flushes with it instead of asking sled again: a run on a full disk
//! ends at once with an error saying what happened.

use stategraph_checkpoint::CheckpointError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The first I/O failure of one store.
pub(crate) struct IoFailure {
    path: PathBuf,
    first: OnceLock<CheckpointError>,
}

impl IoFailure {
    pub(crate) fn new(path: &Path) -> Self {
        IoFailure {
            path: path.to_path_buf(),
            first: OnceLock::new(),
        }
    }

    /// Fails with the store's first I/O failure, if it had one.
    pub(crate) fn check(&self) -> Result<(), CheckpointError> {
        match self.first.get() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The error for a failed sled call; an I/O failure is remembered.
    pub(crate) fn error(&self, e: sled::Error) -> CheckpointError {
        let sled::Error::Io(io) = &e else {
            return CheckpointError::storage(e);
        };
        let error = io_error(&self.path, io);
        let _ = self.first.set(error.clone());
        error
    }
}

/// True when an I/O error says the disk is full.
pub(crate) fn is_disk_full(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC) || e.kind() == std::io::ErrorKind::StorageFull
}

/// A store's I/O error: a full disk is told apart, since its remedy differs.
pub(crate) fn io_error(path: &Path, e: &std::io::Error) -> CheckpointError {
    if is_disk_full(e) {
        CheckpointError::DiskFull {
            path: path.display().to_string(),
        }
    } else {
        CheckpointError::Storage(format!(
            "writing the store at {} failed: {e}",
            path.display()
        ))
    }
}
