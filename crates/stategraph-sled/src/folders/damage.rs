//! What a listing, a reader's copy and the blob checks say of a damaged store: a record of its
//! own, below all three, since each of them finds damage.

use serde::{Deserialize, Serialize};

/// What is wrong with a damaged store, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// The damaged file (or the store's directory when sled does not say which).
    pub file: String,
    /// What is wrong.
    pub reason: String,
    /// True when the store no longer holds checkpoints it had: its newest checkpoint is not
    /// known, so reading "the newest" fails; named checkpoints still read.
    #[serde(default)]
    pub lost_checkpoints: bool,
}
