//! How keys are laid out: every key starts with the thread id and a 0 byte, so one thread is one
//! key range; a checkpoint's key adds its id (16 bytes, time-ordered).

use crate::io_failure::IoFailure;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::CheckpointId;

pub(super) fn thread_prefix(thread: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(thread.len() + 1 + 16 + 8);
    k.extend_from_slice(thread.as_bytes());
    k.push(0);
    k
}

pub(super) fn checkpoint_key(thread: &str, id: CheckpointId) -> Vec<u8> {
    let mut k = thread_prefix(thread);
    k.extend_from_slice(id.as_bytes());
    k
}

pub(super) fn id_from_key(thread: &str, key: &[u8]) -> Option<CheckpointId> {
    let start = thread.len() + 1;
    let bytes: [u8; 16] = key.get(start..start + 16)?.try_into().ok()?;
    Some(CheckpointId::from_bytes(bytes))
}

pub(super) fn remove_prefix(
    tree: &sled::Tree,
    prefix: &[u8],
    io: &IoFailure,
) -> Result<(), CheckpointError> {
    let mut batch = sled::Batch::default();
    for item in tree.scan_prefix(prefix).keys() {
        batch.remove(item.map_err(|e| io.error(e))?);
    }
    tree.apply_batch(batch).map_err(|e| io.error(e))
}
