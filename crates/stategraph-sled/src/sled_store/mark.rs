//! The per-thread layout's mark of a store never written (`checkpoint/folders/layout.rs`): a
//! file beside the store, removed by the process writing the store as soon as a flush has made
//! a record of it durable. Until then, a store there that holds nothing was never written
//! (its process died first), rather than emptied by damage. A marked store's first record is
//! flushed in every durability mode (`sync` in `mod.rs`): written without a flush (async and
//! exit durability), sled's own background flush would put it on disk with the mark still
//! there, and a store later emptied by damage would read as never written.

use super::SledCheckpointer;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The mark a store's flushes remove once, if it has one.
pub(super) struct UnwrittenMark {
    /// Whether `file` still holds a mark: all a flush reads once it is gone.
    pending: AtomicBool,
    file: Mutex<Option<PathBuf>>,
}

impl UnwrittenMark {
    pub(super) fn none() -> Self {
        UnwrittenMark {
            pending: AtomicBool::new(false),
            file: Mutex::new(None),
        }
    }
}

impl SledCheckpointer {
    /// Has `mark` removed by the first flush after which the store holds a record on disk (see
    /// the module's documentation). Only the process writing the store calls this: a read never
    /// removes a mark.
    pub(crate) fn remove_once_written(&self, mark: PathBuf) {
        *self
            .unwritten
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(mark);
        self.unwritten.pending.store(true, Ordering::Release);
    }

    /// Asked before a flush starts: true when a mark waits and the store holds a record, which
    /// that flush makes durable. After the mark is gone, one atomic load.
    pub(super) fn flush_makes_first_record_durable(&self) -> bool {
        self.unwritten.pending.load(Ordering::Acquire) && matches!(self.holds_nothing(), Ok(false))
    }

    /// After a flush that made a record durable: the mark goes (once).
    pub(super) fn written(&self) {
        let mark = self
            .unwritten
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.unwritten.pending.store(false, Ordering::Release);
        if let Some(mark) = mark {
            remove_mark(&mark);
        }
    }
}

/// Removes a store's mark of never having been written, now that it holds a record on disk.
/// One that cannot be removed only keeps saying so: harmless while the store holds records.
pub(crate) fn remove_mark(mark: &Path) {
    match std::fs::remove_file(mark) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(file = %mark.display(), error = %e, "cannot remove a new thread's mark")
        }
    }
}
