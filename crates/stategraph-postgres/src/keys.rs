//! How ids become keys. A thread id has no length limit once a subgraph's namespace is added to
//! it, nor has a journal key, and a Postgres btree entry holds at most ~2.7 KB (LangGraph #6239:
//! a long thread id broke its index). So every table is keyed by the first 16 bytes of the
//! BLAKE3 hash of the id, and the text is kept beside it, unindexed.

use stategraph_checkpoint::{root_thread, CheckpointId};

/// 16 bytes of BLAKE3: collisions are as likely as for the pieces' names (`chunks`).
pub(crate) fn hash16(text: &str) -> Vec<u8> {
    blake3::hash(text.as_bytes()).as_bytes()[..16].to_vec()
}

/// A thread's key, and the key of its root thread (the same for a root thread), whose row is
/// the lock of the whole tree and holds its lease.
pub(crate) struct ThreadKeys {
    pub(crate) key: Vec<u8>,
    pub(crate) root: Vec<u8>,
}

impl ThreadKeys {
    pub(crate) fn of(thread: &str) -> Self {
        let root = root_thread(thread);
        let key = hash16(thread);
        ThreadKeys {
            root: if root == thread {
                key.clone()
            } else {
                hash16(root)
            },
            key,
        }
    }
}

/// The checkpoint a journal key belongs to: a node's recorded call is keyed
/// `{checkpoint id}/...` and is deleted with its checkpoint.
pub(crate) fn journal_checkpoint(key: &str) -> Option<CheckpointId> {
    let (id, _) = key.split_once('/')?;
    let parsed = CheckpointId::try_parse(id).ok()?;
    // Only the form a checkpoint id is written in (lowercase, hyphenated), as the other stores
    // match the prefix `{id}/` as text.
    (parsed.to_string() == id).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subgraphs_keys_point_at_its_root_thread() {
        let child = ThreadKeys::of("t1/review:0a1b2c3d");
        assert_eq!(child.root, ThreadKeys::of("t1").key);
        assert_ne!(child.key, child.root);
        let root = ThreadKeys::of("t1");
        assert_eq!(root.key, root.root);
        assert_eq!(hash16(&"x".repeat(10_000)).len(), 16);
    }

    #[test]
    fn only_a_node_calls_key_names_a_checkpoint() {
        let id = uuid::Uuid::now_v7();
        assert_eq!(journal_checkpoint(&format!("{id}/search:0")), Some(id));
        assert_eq!(journal_checkpoint("graph/origin"), None);
        let upper = id.to_string().to_uppercase();
        assert_eq!(journal_checkpoint(&format!("{upper}/x")), None);
        assert_eq!(journal_checkpoint(&id.to_string()), None);
    }
}
