//! Pieces of large records (see the checkpoint crate's `chunks`): a snapshot of 256 KiB or more,
//! or any record that large, is cut by content into pieces named by their BLAKE3 hash, stored
//! once per thread in `stategraph_pieces` and shared by every record that holds them. They are
//! keyed by content, never by a branch or a version, so a fork's records cannot collide with
//! its source's (langgraphjs #1812).
//!
//! `chunks` reads pieces through a [`ChunkStore`] that answers at once, and a round trip per
//! piece would cost a large snapshot hundreds of them; so a record is read in a few batches (an
//! index level at a time, [`chunks::pieces_to_fetch`]) into [`Fetched`], and a record is written
//! with its new pieces collected in [`NewPieces`], of which the transaction sends only those the
//! thread lacks.

use deadpool_postgres::GenericClient;
use stategraph_checkpoint::chunks::{self, ChunkHash, ChunkStore};
use stategraph_checkpoint::CheckpointError;
use std::collections::{HashMap, HashSet};

const GET_PIECES: &str =
    "SELECT hash, bytes FROM stategraph_pieces WHERE thread_key = $1 AND hash = ANY($2)";
/// Only records that name pieces keep pieces alive.
const NAMING_RECORDS: &str = "SELECT record FROM stategraph_checkpoints
    WHERE thread_key = $1 AND names_pieces
    UNION ALL SELECT record FROM stategraph_writes WHERE thread_key = $1 AND names_pieces";
const DELETE_UNNAMED: &str =
    "DELETE FROM stategraph_pieces WHERE thread_key = $1 AND hash <> ALL($2)";

/// The pieces a record being encoded names, in the order they were cut, each once.
#[derive(Default)]
pub(crate) struct NewPieces {
    list: Vec<(ChunkHash, Vec<u8>)>,
    seen: HashSet<ChunkHash>,
}

impl NewPieces {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn hashes(&self) -> impl Iterator<Item = &ChunkHash> {
        self.list.iter().map(|(h, _)| h)
    }

    pub(crate) fn into_list(self) -> Vec<(ChunkHash, Vec<u8>)> {
        self.list
    }
}

impl ChunkStore for NewPieces {
    fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError> {
        Ok(self.seen.contains(hash))
    }

    fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError> {
        if self.seen.insert(*hash) {
            self.list.push((*hash, bytes.to_vec()));
        }
        Ok(())
    }

    fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError> {
        Ok(self
            .list
            .iter()
            .find(|(h, _)| h == hash)
            .map(|(_, b)| b.clone()))
    }
}

/// Pieces read from the database for the records being read.
#[derive(Default)]
pub(crate) struct Fetched(HashMap<ChunkHash, Vec<u8>>);

impl ChunkStore for Fetched {
    fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError> {
        Ok(self.0.contains_key(hash))
    }

    fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError> {
        self.0.insert(*hash, bytes.to_vec());
        Ok(())
    }

    fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError> {
        Ok(self.0.get(hash).cloned())
    }
}

/// Reads the pieces `records` need (all, or with `leaves` false only the index pieces a sweep
/// reads), a level at a time. A piece the thread lacks is simply not fetched: reading the
/// record then reports it missing.
pub(crate) async fn fetch(
    client: &impl GenericClient,
    thread_key: &[u8],
    records: &[&[u8]],
    leaves: bool,
) -> Result<Fetched, tokio_postgres::Error> {
    let mut have = Fetched::default();
    let mut asked = HashSet::new();
    let statement = client.prepare_cached(GET_PIECES).await?;
    loop {
        let want: Vec<Vec<u8>> = chunks::pieces_to_fetch(records.iter().copied(), &have, leaves)
            .into_iter()
            .filter(|h| asked.insert(*h))
            .map(|h| h.to_vec())
            .collect();
        if want.is_empty() {
            return Ok(have);
        }
        for row in client.query(&statement, &[&thread_key, &want]).await? {
            let hash: Vec<u8> = row.try_get(0)?;
            if let Ok(hash) = ChunkHash::try_from(hash.as_slice()) {
                have.0.insert(hash, row.try_get(1)?);
            }
        }
    }
}

/// Deletes the thread's pieces no remaining record names. Runs in the transaction that deleted
/// records, which holds the root's row exclusively: no write adds a record naming a piece
/// meanwhile.
pub(crate) async fn sweep(
    client: &impl GenericClient,
    thread: &str,
    thread_key: &[u8],
) -> Result<(), crate::write_failure::Failed> {
    let naming = client.prepare_cached(NAMING_RECORDS).await?;
    let records: Vec<Vec<u8>> = client
        .query(&naming, &[&thread_key])
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let indexes = fetch(client, thread_key, &slices, false).await?;
    let live: Vec<Vec<u8>> = chunks::live_pieces(thread, slices.iter().copied(), &indexes)?
        .into_iter()
        .map(|h| h.to_vec())
        .collect();
    let delete = client.prepare_cached(DELETE_UNNAMED).await?;
    client.execute(&delete, &[&thread_key, &live]).await?;
    Ok(())
}
