//! Remembering that a store's disk failed.
//!
//! After a write that failed for lack of space, sled 0.34 can wait forever in its next flush (the
//! failed write leaves a buffer it still waits for; seen on a real full filesystem, where a run
//! then never ended and ignored Ctrl+C). So the first I/O failure is kept, and from then on the
//! store answers writes and flushes with it instead of asking sled again: a run on a full disk
//! ends at once with an error saying what happened.
//!
//! The failed write is not always one of ours: sled's own writers (its log flusher, its I/O
//! threads) can fail for lack of space with no call of ours seeing the error, and the next flush
//! then waits forever all the same. So on a nearly full disk a flush runs on a thread of its own
//! and is given up after a while, as the disk's failure ([`IoFailure::flush`]).

use stategraph_checkpoint::CheckpointError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Below this much free space on a store's filesystem, a flush is watched (see the module doc).
/// Above it sled's writers have room, and a flush runs inline at no extra cost.
const WATCHED_BELOW_FREE: u64 = 16 << 20;

/// How long a watched flush may take before the disk counts as failed: a healthy fsync takes
/// milliseconds, a busy disk's a second or two.
const FLUSH_PATIENCE: Duration = Duration::from_secs(10);

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

    /// Flushes `db`. On a nearly full disk the flush runs on a thread of its own, and one that
    /// has not returned after [`FLUSH_PATIENCE`] is the disk's failure, remembered: the run ends
    /// with an error instead of waiting forever. Its thread stays blocked in sled, holding the
    /// store, which a store whose disk failed keeps until the process ends anyway.
    pub(crate) fn flush(&self, db: &sled::Db) -> Result<(), CheckpointError> {
        if free_bytes(&self.path).is_none_or(|free| free >= WATCHED_BELOW_FREE) {
            return db.flush().map(drop).map_err(|e| self.error(e));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let flushing = db.clone();
        let spawned = std::thread::Builder::new()
            .name("sled-flush".into())
            .spawn(move || {
                let _ = tx.send(flushing.flush().map(drop));
            });
        if spawned.is_err() {
            return db.flush().map(drop).map_err(|e| self.error(e));
        }
        match rx.recv_timeout(FLUSH_PATIENCE) {
            Ok(flushed) => flushed.map_err(|e| self.error(e)),
            Err(_) => {
                let error = CheckpointError::DiskFull {
                    path: self.path.display().to_string(),
                };
                let _ = self.first.set(error.clone());
                Err(error)
            }
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

/// Bytes free to this user on the filesystem holding `path`; `None` when it cannot be asked.
fn free_bytes(path: &Path) -> Option<u64> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs only writes into the zeroed struct we own; the path is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
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
