//! Reading a thread whose holder does not answer.
//!
//! A process that holds a thread serves its reads (`owner.rs`). One that does not answer —
//! stopped with Ctrl+Z or SIGSTOP, or a program holding a store without serving it — would make
//! every reader wait and fail. Its store's files hold what it last flushed (in sync mode, every
//! step it finished), so after a short wait a reader copies them without the lock and reads the
//! copy, marked as possibly behind ([`FolderCheckpointer::possibly_behind`]). A copy that does
//! not read cleanly (its holder was writing while it was copied) says nothing about the store:
//! the reader is told the thread is busy, never that it is damaged.
//!
//! A writer cannot take such a thread: its holder keeps the thread's lock, whatever its lease
//! says, until it goes on or ends; when it is stopped, the error says so at once
//! ([`CheckpointError::HolderStopped`]) instead of after a wait.

use super::layout::{fingerprint, flushed_beside, lock_holder};
use super::read_copy::{open_copied, ReadCopy, Unopened};
use super::temp_copy::link_to_temp;
use super::{FolderCheckpointer, Source};
use crate::sled_store::read_flushed;
use stategraph_checkpoint::CheckpointError;

impl FolderCheckpointer {
    /// A copy of the store of `root`, which another process holds without answering reads;
    /// `None` when the copy does not read cleanly.
    pub(super) async fn copy_of_held(
        &self,
        root: &str,
        blobs: &[String],
    ) -> Result<Option<ReadCopy>, CheckpointError> {
        let store_dir = self.layout.store_dir(root);
        let holder = lock_holder(&self.layout.lock_path(root)).unwrap_or(0);
        // The flush witness before the files: a flush it names finished before they were copied,
        // so the copy holds it; read after, it could name a flush the copy missed.
        let flushed = flushed_beside(&store_dir).and_then(|f| read_flushed(&f, root));
        let print = fingerprint(&store_dir);
        let copied = Unopened {
            dir: link_to_temp(&store_dir)?,
            fingerprint: print,
            flushed,
            held_by: Some(holder),
        };
        let copy = match open_copied(copied, &store_dir, root, self.options, blobs) {
            Ok(copy) if copy.damage.is_none() => copy,
            Ok(_) | Err(CheckpointError::Damaged { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        // Short of what its index or its flush witness saw: caught mid-write, not damaged.
        if self
            .lost_since_indexed(root, &copy, &store_dir)
            .await?
            .is_some()
        {
            return Ok(None);
        }
        Ok(Some(copy))
    }

    /// The process (its id; 0 when not known) that holds `thread` without answering reads,
    /// when reads of it come from a copy of its store: what they return is what that process
    /// had flushed, possibly behind what it has done since. `None` when reads are current.
    ///
    /// ```no_run
    /// # async fn demo(store: stategraph_sled::FolderCheckpointer) -> Result<(), stategraph_checkpoint::CheckpointError> {
    /// if let Some(pid) = store.possibly_behind("thread-1").await? {
    ///     eprintln!("process {pid} holds the thread and does not answer: shown as last flushed");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn possibly_behind(&self, thread: &str) -> Result<Option<u32>, CheckpointError> {
        Ok(match self.source(thread).await? {
            Some(Source::Copy(copy)) => copy.held_by,
            _ => None,
        })
    }
}

/// True when process `pid` is stopped (Ctrl+Z, SIGSTOP, or stopped by a debugger); false when
/// it runs, is gone, or this system does not say.
pub(super) fn process_stopped(pid: u32) -> bool {
    // `/proc/PID/stat` is `pid (name) STATE ...`; the name may hold spaces and parentheses, so
    // the state is read after the last `)`.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
        })
        .unwrap_or(false)
}
