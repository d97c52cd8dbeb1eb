//! How a stored record names a tree of pieces (see [`chunks`](crate::chunks)): the root
//! piece's hash, the depth of the index below it and the length it adds up to.
//!
//! `chunks.rs` cuts data into pieces and hands back a root; the compact layout (`compact.rs`)
//! writes one into a checkpoint whose snapshot is stored as pieces, and the framing
//! (`codec.rs`) into a spilled record. The root is part of those stored formats, so it sits
//! below the three, and `chunks` re-exports it where backends find it.

use serde::{Deserialize, Serialize};

/// A piece's name: the first 16 bytes of its BLAKE3 hash.
pub type ChunkHash = [u8; 16];

/// Where a chunked snapshot starts: the root piece, how many index levels lie below it, and
/// the length of the JSON they add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRoot {
    pub hash: ChunkHash,
    pub depth: u8,
    pub len: u64,
}
