//! What the per-thread layout and tests read of a store beyond the `Checkpointer` contract, and
//! the hooks the corruption tests damage a store with.

use super::keys::{checkpoint_key, id_from_key, thread_prefix};
use super::SledCheckpointer;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::CheckpointId;

impl SledCheckpointer {
    /// The ids of the thread's checkpoints, newest first, read from their keys only (so a
    /// damaged record is still listed).
    pub(crate) fn checkpoint_ids(
        &self,
        thread: &str,
    ) -> Result<Vec<CheckpointId>, CheckpointError> {
        self.checkpoints
            .scan_prefix(thread_prefix(thread))
            .keys()
            .rev()
            .map(|k| {
                let k = k.map_err(|e| self.io.error(e))?;
                id_from_key(thread, &k).ok_or_else(|| {
                    CheckpointError::Storage(format!(
                        "a checkpoint key of thread `{thread}` holds no checkpoint id"
                    ))
                })
            })
            .collect()
    }

    /// The threads of the store, without their subgraphs' namespaces (`{root}/{ns}`, part of
    /// their root thread): what `list_threads` returns, without a future to await.
    pub(crate) fn root_threads(&self) -> Result<Vec<String>, CheckpointError> {
        let mut out = Vec::new();
        for k in self.threads.iter().keys() {
            let k = k.map_err(|e| self.io.error(e))?;
            let thread = String::from_utf8_lossy(&k).into_owned();
            if stategraph_checkpoint::is_root_thread(&thread) {
                out.push(thread);
            }
        }
        Ok(out)
    }

    /// True when the store holds no record of any kind.
    pub(crate) fn holds_nothing(&self) -> Result<bool, CheckpointError> {
        for tree in [&self.checkpoints, &self.journal, &self.writes, &self.leases] {
            if tree.first().map_err(|e| self.io.error(e))?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// When the thread's oldest checkpoint was written; `None` when it has none.
    pub(crate) fn first_checkpoint_time(
        &self,
        thread: &str,
    ) -> Result<Option<u64>, CheckpointError> {
        let first = self
            .checkpoints
            .scan_prefix(thread_prefix(thread))
            .next()
            .transpose()
            .map_err(|e| self.io.error(e))?;
        let pieces = self.pieces_of(thread);
        Ok(first
            .map(|(k, v)| pieces.decode(&k, &v))
            .transpose()?
            .map(|r| r.metadata.created_at_ms))
    }

    /// Overwrites the stored bytes of a checkpoint. For tests of corruption handling.
    #[doc(hidden)]
    pub fn tamper(
        &self,
        thread: &str,
        id: CheckpointId,
        f: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        let key = checkpoint_key(thread, id);
        if let Some(v) = self.checkpoints.get(&key).map_err(|e| self.io.error(e))? {
            let mut bytes = v.to_vec();
            f(&mut bytes);
            self.checkpoints
                .insert(key, bytes)
                .map_err(|e| self.io.error(e))?;
        }
        Ok(())
    }

    /// Applies `f` to every stored piece of the thread's large snapshots. For tests of
    /// corruption handling.
    #[doc(hidden)]
    pub fn tamper_pieces(
        &self,
        thread: &str,
        mut f: impl FnMut(&mut Vec<u8>),
    ) -> Result<(), CheckpointError> {
        for item in self.pieces.scan_prefix(thread_prefix(thread)) {
            let (key, value) = item.map_err(|e| self.io.error(e))?;
            let mut bytes = value.to_vec();
            f(&mut bytes);
            self.pieces
                .insert(key, bytes)
                .map_err(|e| self.io.error(e))?;
        }
        Ok(())
    }

    /// Bytes of keys and values the thread's checkpoints, pending writes and pieces hold
    /// (before sled's own overhead). For tests of how storage grows.
    #[doc(hidden)]
    pub fn stored_bytes(&self, thread: &str) -> Result<u64, CheckpointError> {
        let prefix = thread_prefix(thread);
        let mut total = 0u64;
        for tree in [&self.checkpoints, &self.writes, &self.pieces] {
            for item in tree.scan_prefix(&prefix) {
                let (k, v) = item.map_err(|e| self.io.error(e))?;
                total += (k.len() + v.len()) as u64;
            }
        }
        Ok(total)
    }
}
