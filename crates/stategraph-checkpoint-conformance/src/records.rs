//! Checkpoint records made by hand, for a backend's own tests that write a store directly
//! rather than through a graph.

use stategraph::checkpoint::{
    CheckpointId, CheckpointMetadata, CheckpointRecord, Frontier, Source, StateData,
};

/// The `n`th checkpoint (from 1) of a chain on `thread`: id `n`, parent `n - 1` (none for the
/// first), step `n`, state the snapshot `[n]`, written by run `r` at `n` ms.
///
/// ```
/// use stategraph_checkpoint_conformance::records::chained;
/// let second = chained("t", 2);
/// assert_eq!(second.parent_id, Some(chained("t", 1).id));
/// ```
pub fn chained(thread: &str, n: u128) -> CheckpointRecord {
    let step = u64::try_from(n).unwrap_or(u64::MAX);
    CheckpointRecord {
        thread_id: thread.into(),
        id: CheckpointId::from_u128(n),
        parent_id: (n > 1).then(|| CheckpointId::from_u128(n - 1)),
        step,
        state: StateData::Snapshot(
            serde_json::value::to_raw_value(&[n]).expect("an array of one number is JSON"),
        ),
        frontier: Frontier::default(),
        metadata: CheckpointMetadata {
            source: Source::Loop,
            writers: vec![],
            created_at_ms: step,
            schema_version: 0,
            run_id: "r".into(),
            graph: None,
        },
    }
}
