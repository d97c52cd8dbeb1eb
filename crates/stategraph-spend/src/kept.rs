//! What a root thread's checkpoints before one of them left off-ledger, kept by the run that
//! holds the thread when it ends ([`off_ledger_keeping`](super::off_ledger_keeping)), so a
//! readout walks only the checkpoints written since instead of the whole history.
//!
//! It stays true: what a checkpoint leaves off-ledger changes only while it is the thread's
//! newest (its tasks run, fail, are answered there); once a newer one follows it on the branch,
//! no step runs at it again (a replay of it starts a branch at a new checkpoint). It is priced
//! with the thread's prices of the time, and is not used with other prices.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{CheckpointId, Checkpointer};
use stategraph_llm::{Pricing, UsageLedger};

/// The root thread's journal entry.
const KEPT: &str = "usage/off_ledger_before";

/// What the checkpoints before `checkpoint`, on its branch, left off-ledger.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Kept {
    /// The branch's head when it was kept.
    pub checkpoint: CheckpointId,
    /// The prices its failed attempts were priced with.
    pub pricing: Option<Pricing>,
    /// What the checkpoints before it left.
    pub before: UsageLedger,
}

/// The root `thread`'s kept sum, when it has one priced with `pricing`. A readout: an entry that
/// cannot be read is not used (the walk then reads the whole history).
pub(super) async fn read(
    store: &dyn Checkpointer,
    thread: &str,
    pricing: Option<&Pricing>,
) -> Option<Kept> {
    if !stategraph::runtime::ThreadPath::is_root_id(thread) {
        return None;
    }
    let value = store.get_journal(thread, KEPT).await.ok()??;
    let kept: Kept = serde_json::from_value(value).ok()?;
    (kept.pricing.as_ref() == pricing).then_some(kept)
}

/// Keeps, for the root `thread`, what the checkpoints before `checkpoint` left (`before`).
/// A help to later readouts, not a record: a failure is logged, never returned.
pub(super) async fn write(
    store: &dyn Checkpointer,
    thread: &str,
    checkpoint: CheckpointId,
    pricing: Option<&Pricing>,
    before: &UsageLedger,
) {
    let kept = Kept {
        checkpoint,
        pricing: pricing.copied(),
        before: before.clone(),
    };
    let written = match serde_json::to_value(&kept) {
        Ok(value) => store
            .put_journal(thread, KEPT, &value)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(why) = written {
        tracing::warn!(%why, thread, "the off-ledger sum could not be kept; the next readout reads the whole history");
    }
}
