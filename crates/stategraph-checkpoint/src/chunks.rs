//! Large snapshots stored as content-defined chunks that a thread's snapshots share.
//!
//! A snapshot holds the whole state, and an agent's state mostly grows at its end (messages,
//! results). Stored whole, a snapshot costs the full state every time, so a thread either
//! snapshots rarely (and a read replays a long chain of deltas: thousands at 100k steps) or
//! pays for the state again and again. Here a snapshot's JSON is cut where its content says
//! (FastCDC), so a cut only moves where the bytes changed; each piece is stored once per thread
//! under its BLAKE3 hash. A new snapshot of a state that grew at its end writes its last piece
//! and a small index, whatever the state's size, which lets the runtime snapshot often.
//!
//! The pieces form a tree: the leaves are the JSON; when there is more than one, their
//! (hash, length) list is itself cut into pieces, and so on until one piece remains, the root.
//! The checkpoint record holds the root's hash, the depth and the total length.
//!
//! A piece is checked against its hash when read, so a damaged or missing piece is reported as
//! such, never read as something else.
//!
//! A large record that is not a snapshot (a checkpoint with a large delta, a large pending
//! write) is stored the same way as a whole ([`spill`]): its frame is cut into pieces and the
//! store keeps only their root (frame format 5). Such a record mostly repeats what the state
//! already holds (a node's large update is in the next snapshot too), so its pieces are shared,
//! and no backend holds one large value whole: sled keeps every value it was handed in its page
//! cache, charged at the size it takes in its log, which for a large value is a few bytes.

pub use super::chunk_root::{ChunkHash, ChunkRoot};
use super::codec::FrameError;
use super::error::{corrupt, CheckpointError};
use super::record::{CheckpointRecord, StateData};
use std::collections::HashSet;

/// Snapshots shorter than this stay inline in their record. An inline snapshot reads back in
/// one lookup (~60 us for 100 KB on sled), where its pieces, named by hash, lie scattered over
/// the store (~700 us for the same 100 KB); and up to this size storing a snapshot whole is
/// cheap enough for the runtime to pay for with deltas.
pub const CHUNKED_FROM: usize = 256 * 1024;
const MIN_CHUNK: usize = 2 * 1024;
const AVG_CHUNK: usize = 4 * 1024;
/// Below a quarter of sled's default 64 KiB segment, so no piece on its own becomes a separate
/// blob file (a sled leaf holding several still can).
const MAX_CHUNK: usize = 12 * 1024;
/// One index entry: the piece's hash and its length (u32, little-endian).
const ENTRY: usize = 16 + 4;

/// Where [`split`] hands each piece.
type PutPiece<'a> = dyn FnMut(&ChunkHash, &[u8]) -> Result<(), CheckpointError> + 'a;

/// A backend's pieces for one thread.
pub trait ChunkStore {
    /// Whether the piece is stored.
    fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError>;
    /// Stores a piece.
    fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError>;
    /// A stored piece, as written.
    fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError>;
}

fn hash(bytes: &[u8]) -> ChunkHash {
    let mut out = [0u8; 16];
    out.copy_from_slice(&blake3::hash(bytes).as_bytes()[..16]);
    out
}

fn hex(hash: &ChunkHash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a new snapshot of `state_bytes` of JSON costs a store that shares pieces, when the
/// thread's previous snapshot differed from it in one place: a leaf and the index path above it.
pub fn shared_snapshot_cost(state_bytes: usize) -> usize {
    if state_bytes < CHUNKED_FROM {
        state_bytes
    } else {
        state_bytes.min(3 * AVG_CHUNK)
    }
}

/// Cuts `data` into pieces, hands each one to `put` (the same piece may come more than once),
/// and returns the root.
fn split(data: &[u8], put: &mut PutPiece<'_>) -> Result<ChunkRoot, CheckpointError> {
    let mut level = cut(data, put)?;
    let mut depth = 0u8;
    while level.len() > 1 {
        let mut index = Vec::with_capacity(level.len() * ENTRY);
        for (h, len) in &level {
            index.extend_from_slice(h);
            index.extend_from_slice(&len.to_le_bytes());
        }
        level = cut(&index, put)?;
        depth += 1;
    }
    let (root, _) = level.first().copied().unwrap_or((hash(&[]), 0));
    if data.is_empty() {
        put(&root, &[])?;
    }
    Ok(ChunkRoot {
        hash: root,
        depth,
        len: data.len() as u64,
    })
}

fn cut(data: &[u8], put: &mut PutPiece<'_>) -> Result<Vec<(ChunkHash, u32)>, CheckpointError> {
    let mut pieces = Vec::with_capacity(data.len() / AVG_CHUNK + 1);
    for c in fastcdc::v2020::FastCDC::new(data, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK) {
        let bytes = &data[c.offset..c.offset + c.length];
        let h = hash(bytes);
        put(&h, bytes)?;
        // A piece is at most MAX_CHUNK bytes, far below u32::MAX.
        pieces.push((h, c.length as u32));
    }
    Ok(pieces)
}

/// Reads one piece and checks it against its name and expected length.
fn fetch(store: &dyn ChunkStore, h: &ChunkHash, len: Option<u64>) -> Result<Vec<u8>, String> {
    let bytes = store
        .get(h)
        .map_err(|e| format!("snapshot piece {} unreadable: {e}", hex(h)))?
        .ok_or_else(|| format!("snapshot piece {} is missing", hex(h)))?;
    if hash(&bytes) != *h || len.is_some_and(|l| l != bytes.len() as u64) {
        return Err(format!("snapshot piece {} does not match its hash", hex(h)));
    }
    Ok(bytes)
}

fn entries(index: &[u8]) -> Result<impl Iterator<Item = (ChunkHash, u32)> + '_, String> {
    if index.len() % ENTRY != 0 {
        return Err(format!(
            "a snapshot index of {} bytes is not a whole number of entries",
            index.len()
        ));
    }
    Ok(index.chunks_exact(ENTRY).map(|e| {
        let mut h = [0u8; 16];
        h.copy_from_slice(&e[..16]);
        (h, u32::from_le_bytes([e[16], e[17], e[18], e[19]]))
    }))
}

/// Reassembles a snapshot's JSON from its pieces, checking each.
fn join(store: &dyn ChunkStore, root: &ChunkRoot) -> Result<Vec<u8>, String> {
    let top_len = (root.depth == 0).then_some(root.len);
    let mut bytes = fetch(store, &root.hash, top_len)?;
    for _ in 0..root.depth {
        let index = bytes;
        // Sized up front: grown by doubling, a 100 MB state took twice its size while joined.
        let size: usize = entries(&index)?.map(|(_, len)| len as usize).sum();
        let mut next = Vec::with_capacity(size.min(usize::try_from(root.len).unwrap_or(0)));
        for (h, len) in entries(&index)? {
            next.extend_from_slice(&fetch(store, &h, Some(len.into()))?);
        }
        bytes = next;
    }
    if bytes.len() as u64 != root.len {
        return Err(format!(
            "a snapshot reassembled to {} bytes where {} were written",
            bytes.len(),
            root.len
        ));
    }
    Ok(bytes)
}

/// Adds every piece under `root` to `live`, reading only index pieces. `levels` names the index
/// levels already read (through another root), whose pieces are marked already.
///
/// A level is read whole: its pieces joined are the index of the level below, and a piece alone
/// is cut where its content says, not at an entry's end (a tree of two index levels or more has
/// pieces that end inside an entry).
fn mark(
    store: &dyn ChunkStore,
    root: &ChunkRoot,
    live: &mut HashSet<ChunkHash>,
    levels: &mut HashSet<ChunkHash>,
) -> Result<(), String> {
    live.insert(root.hash);
    let mut level = vec![root.hash];
    for above in (1..=root.depth).rev() {
        if !levels.insert(level_name(&level, above)) {
            break;
        }
        let mut index = Vec::new();
        for h in &level {
            index.extend_from_slice(&fetch(store, h, None)?);
        }
        level = entries(&index)?.map(|(child, _)| child).collect();
        live.extend(level.iter().copied());
    }
    Ok(())
}

/// A name for one level of a tree: its pieces in order, and how many levels lie below.
fn level_name(level: &[ChunkHash], above: u8) -> ChunkHash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[above]);
    for h in level {
        hasher.update(h);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    out
}

/// Cuts `data` into pieces that go to `store` (those it already holds are not written again).
fn put_pieces(data: &[u8], store: &mut dyn ChunkStore) -> Result<ChunkRoot, CheckpointError> {
    let mut put = |h: &ChunkHash, bytes: &[u8]| {
        if store.contains(h)? {
            Ok(())
        } else {
            store.insert(h, bytes)
        }
    };
    split(data, &mut put)
}

/// Encodes a checkpoint for a backend that keeps pieces: a large snapshot goes to `store` first
/// (pieces it already holds are not written again), and the record names its root. A record
/// that is large for another reason (a large delta) is stored as pieces as a whole.
pub fn encode_checkpoint(
    record: &CheckpointRecord,
    store: &mut dyn ChunkStore,
) -> Result<Vec<u8>, CheckpointError> {
    let fail = |e| corrupt(&record.thread_id, Some(record.id), "checkpoint", e);
    let root = match &record.state {
        StateData::Snapshot(json) if json.get().len() >= CHUNKED_FROM => {
            Some(put_pieces(json.get().as_bytes(), store)?)
        }
        _ => None,
    };
    let frame = super::codec::encode_checkpoint_with(record, root.as_ref()).map_err(fail)?;
    spill(frame, root.as_ref(), store)
        .map_err(|e| e.in_record(&record.thread_id, Some(record.id), "checkpoint"))
}

/// Stores a framed record of [`CHUNKED_FROM`] bytes or more as pieces in `store`, and returns
/// the small frame that names them (format 5); a smaller one is returned as it is. `inner` is
/// the root of the pieces the frame itself names, if any (a checkpoint's snapshot), which the
/// small frame names as well, so a sweep finds them without reading the record back.
pub fn spill(
    frame: Vec<u8>,
    inner: Option<&ChunkRoot>,
    store: &mut dyn ChunkStore,
) -> Result<Vec<u8>, SpillError> {
    if frame.len() < CHUNKED_FROM {
        return Ok(frame);
    }
    let root = put_pieces(&frame, store).map_err(SpillError::Store)?;
    super::codec::encode_spilled(&root, inner).map_err(SpillError::Frame)
}

/// Why a record could not be stored as pieces.
pub enum SpillError {
    Store(CheckpointError),
    Frame(FrameError),
}

impl SpillError {
    /// The error, naming the record for a frame that did not encode.
    pub fn in_record(
        self,
        thread: &str,
        checkpoint: Option<super::record::CheckpointId>,
        what: &'static str,
    ) -> CheckpointError {
        match self {
            SpillError::Store(e) => e,
            SpillError::Frame(e) => corrupt(thread, checkpoint, what, e),
        }
    }
}

/// The frame of a stored record: read back from its pieces when it was spilled ([`spill`]),
/// else the stored bytes themselves.
pub fn unspill<'a>(
    bytes: &'a [u8],
    store: &dyn ChunkStore,
) -> Result<std::borrow::Cow<'a, [u8]>, FrameError> {
    match super::codec::spilled_root(bytes)? {
        None => Ok(std::borrow::Cow::Borrowed(bytes)),
        Some(root) => join(store, &root)
            .map(std::borrow::Cow::Owned)
            .map_err(FrameError::Decode),
    }
}

/// Decodes a checkpoint stored by [`encode_checkpoint`] (or any older format), reassembling a
/// chunked snapshot (or a record stored as pieces as a whole) from `store`.
pub fn decode_checkpoint(
    thread: &str,
    id: super::record::CheckpointId,
    bytes: &[u8],
    store: &dyn ChunkStore,
) -> Result<CheckpointRecord, CheckpointError> {
    let bytes = unspill(bytes, store).map_err(|e| corrupt(thread, Some(id), "checkpoint", e))?;
    let bytes = &bytes[..];
    let mut resolve = |root: &ChunkRoot| {
        let json = join(store, root)?;
        String::from_utf8(json).map_err(|_| "a reassembled snapshot is not UTF-8".to_string())
    };
    super::codec::decode_checkpoint_with(thread, id, bytes, &mut resolve)
        .map_err(|e| corrupt(thread, Some(id), "checkpoint", e))
}

/// Whether removing this stored checkpoint may leave pieces nothing names: it names some, or it
/// is too damaged to tell (then nothing can read its pieces any more either).
pub fn may_hold_pieces(record: &[u8]) -> bool {
    !super::codec::chunk_roots(record).is_ok_and(|roots| roots.is_empty())
}

/// For a backend that reads pieces in batches over a network rather than one at a time (the
/// [`ChunkStore`] it hands [`decode_checkpoint`], [`unspill`] and [`live_pieces`] must answer
/// without waiting): the pieces below the roots that `records` (as stored) name, which `have`
/// lacks and which can be named from what it already holds, an index level at a time.
///
/// Fetch them into `have` and ask again, until nothing is named that was not asked for before
/// (a piece the store does not hold stays named: reading the record then reports it missing).
/// With `leaves` false, only index pieces are named: all that [`live_pieces`] reads. A damaged
/// index names nothing below it; reading the record reports the damage.
pub fn pieces_to_fetch<'a>(
    records: impl IntoIterator<Item = &'a [u8]>,
    have: &dyn ChunkStore,
    leaves: bool,
) -> Vec<ChunkHash> {
    let (mut want, mut named) = (Vec::new(), HashSet::new());
    for bytes in records {
        // A record whose frame does not check out names nothing; reading it says why.
        let Ok(roots) = super::codec::chunk_roots(bytes) else {
            continue;
        };
        for root in roots {
            let mut level = vec![root.hash];
            for depth in 0..=root.depth {
                let is_index = depth < root.depth;
                let lacking: Vec<ChunkHash> = level
                    .iter()
                    .filter(|h| !have.contains(h).unwrap_or(false))
                    .copied()
                    .collect();
                if !lacking.is_empty() {
                    if is_index || leaves {
                        want.extend(lacking.into_iter().filter(|h| named.insert(*h)));
                    }
                    break;
                }
                if !is_index {
                    break;
                }
                // A level's pieces joined are the index of the level below (see `mark`); a
                // damaged one names nothing more, and reading the record reports it.
                let mut index = Vec::new();
                for h in &level {
                    match fetch(have, h, None) {
                        Ok(piece) => index.extend_from_slice(&piece),
                        Err(_) => break,
                    }
                }
                match entries(&index) {
                    Ok(children) => level = children.map(|(child, _)| child).collect(),
                    Err(_) => break,
                };
            }
        }
    }
    want
}

/// The pieces still referenced by any of a thread's stored checkpoints (`records`, as stored).
pub fn live_pieces<'a>(
    thread: &str,
    records: impl IntoIterator<Item = &'a [u8]>,
    store: &dyn ChunkStore,
) -> Result<HashSet<ChunkHash>, CheckpointError> {
    let (mut live, mut indexes) = (HashSet::new(), HashSet::new());
    for bytes in records {
        let fail = |e| corrupt(thread, None, "checkpoint", e);
        for root in super::codec::chunk_roots(bytes).map_err(fail)? {
            mark(store, &root, &mut live, &mut indexes).map_err(|e| fail(FrameError::Decode(e)))?;
        }
    }
    Ok(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Pieces {
        map: HashMap<ChunkHash, Vec<u8>>,
        inserted: usize,
    }

    impl ChunkStore for Pieces {
        fn contains(&self, hash: &ChunkHash) -> Result<bool, CheckpointError> {
            Ok(self.map.contains_key(hash))
        }
        fn insert(&mut self, hash: &ChunkHash, bytes: &[u8]) -> Result<(), CheckpointError> {
            self.inserted += bytes.len();
            self.map.insert(*hash, bytes.to_vec());
            Ok(())
        }
        fn get(&self, hash: &ChunkHash) -> Result<Option<Vec<u8>>, CheckpointError> {
            Ok(self.map.get(hash).cloned())
        }
    }

    #[test]
    fn a_snapshot_stored_as_pieces_reads_back_from_format_3_and_format_4() {
        use crate::{CheckpointMetadata, Frontier, Source};
        let json = String::from_utf8(messages(3_000)).unwrap();
        let record = CheckpointRecord {
            thread_id: "t".into(),
            id: uuid::Uuid::from_u128(9),
            parent_id: Some(uuid::Uuid::from_u128(8)),
            step: 4,
            state: StateData::Snapshot(serde_json::value::RawValue::from_string(json).unwrap()),
            frontier: Frontier::default(),
            metadata: CheckpointMetadata {
                source: Source::Loop,
                writers: vec!["agent".into()],
                created_at_ms: 1,
                schema_version: 1,
                run_id: "r".into(),
                graph: None,
            },
        };
        let mut pieces = Pieces::default();
        let slim = encode_checkpoint(&record, &mut pieces).unwrap();
        assert_eq!(slim[2], 4);
        let StateData::Snapshot(json) = &record.state else {
            unreachable!()
        };
        let root = store(&mut pieces, json.get().as_bytes());
        let old = super::super::codec::encode_checkpoint_as_before(&record, Some(&root));
        assert_eq!(old[2], 3);
        for bytes in [&slim, &old] {
            let read = decode_checkpoint("t", record.id, bytes, &pieces).unwrap();
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::to_value(&record).unwrap()
            );
            // Both name their pieces, so pruning keeps them.
            let live = live_pieces("t", [bytes.as_slice()], &pieces).unwrap();
            assert_eq!(live.len(), pieces.map.len());
        }
    }

    fn store(pieces: &mut Pieces, data: &[u8]) -> ChunkRoot {
        let mut put = |h: &ChunkHash, b: &[u8]| {
            if !pieces.contains(h)? {
                pieces.insert(h, b)?;
            }
            Ok(())
        };
        split(data, &mut put).unwrap()
    }

    fn messages(n: usize) -> Vec<u8> {
        let list: Vec<String> = (0..n)
            .map(|i| format!("{i:>5} {}", "x".repeat(94)))
            .collect();
        serde_json::to_vec(&serde_json::json!({ "messages": list, "turns": n })).unwrap()
    }

    #[test]
    fn a_state_reassembles_exactly_at_every_size() {
        for n in [0, 1, 150, 1_000, 20_000] {
            let data = messages(n);
            let mut pieces = Pieces::default();
            let root = store(&mut pieces, &data);
            assert_eq!(join(&pieces, &root).unwrap(), data, "{n} messages");
        }
        let mut pieces = Pieces::default();
        let root = store(&mut pieces, b"");
        assert_eq!(join(&pieces, &root).unwrap(), b"");
    }

    #[test]
    fn a_grown_state_stores_only_its_new_end() {
        let mut pieces = Pieces::default();
        store(&mut pieces, &messages(20_000));
        let before = pieces.inserted;
        let root = store(&mut pieces, &messages(20_100));
        let added = pieces.inserted - before;
        // 100 new messages are ~10 KB; the rest is the old last leaf and the index path.
        assert!(
            added < 10_400 + 3 * MAX_CHUNK,
            "{added} bytes stored for 10 KB of new messages in a 2 MB state"
        );
        assert!(root.depth >= 1, "a 2 MB state has an index");
        assert_eq!(join(&pieces, &root).unwrap(), messages(20_100));
    }

    #[test]
    fn a_damaged_or_missing_piece_is_reported_not_read() {
        let data = messages(1_000);
        let mut pieces = Pieces::default();
        let root = store(&mut pieces, &data);
        let victim = *pieces.map.keys().find(|h| **h != root.hash).unwrap();

        let mut damaged = Pieces {
            map: pieces.map.clone(),
            ..Pieces::default()
        };
        damaged.map.get_mut(&victim).unwrap()[0] ^= 1;
        let e = join(&damaged, &root).unwrap_err();
        assert!(e.contains("does not match its hash"), "{e}");

        pieces.map.remove(&victim);
        let e = join(&pieces, &root).unwrap_err();
        assert!(e.contains("is missing"), "{e}");
    }

    #[test]
    fn marking_finds_every_piece_of_a_root_and_no_other() {
        let mut pieces = Pieces::default();
        let old = store(&mut pieces, &messages(20_000));
        let all_old: HashSet<ChunkHash> = pieces.map.keys().copied().collect();
        let new = store(&mut pieces, &b"{\"other\":1}".repeat(3_000));
        let mut live = HashSet::new();
        mark(&pieces, &old, &mut live, &mut HashSet::new()).unwrap();
        assert_eq!(live, all_old);
        let mut live_new = HashSet::new();
        mark(&pieces, &new, &mut live_new, &mut HashSet::new()).unwrap();
        assert!(live_new.is_disjoint(&all_old));
    }

    fn record_with(state: StateData, frontier_arg: &str) -> CheckpointRecord {
        use crate::{CheckpointMetadata, Frontier, Source, TaskSpec};
        let mut frontier = Frontier::default();
        frontier.tasks.push(TaskSpec {
            node: "draft".into(),
            arg: Some(serde_json::Value::String(frontier_arg.into())),
        });
        CheckpointRecord {
            thread_id: "t".into(),
            id: uuid::Uuid::from_u128(7),
            parent_id: Some(uuid::Uuid::from_u128(6)),
            step: 2,
            state,
            frontier,
            metadata: CheckpointMetadata {
                source: Source::Loop,
                writers: vec!["draft".into()],
                created_at_ms: 1,
                schema_version: 1,
                run_id: "r".into(),
                graph: None,
            },
        }
    }

    #[test]
    fn a_large_record_is_stored_as_pieces_it_shares_and_reads_back_whole() {
        use crate::NodeWrite;
        let big = String::from_utf8(messages(5_000)).unwrap();
        let raw = serde_json::value::RawValue::from_string(big.clone()).unwrap();
        let mut pieces = Pieces::default();

        // A large delta: its frame is stored as pieces, and a second record holding the same
        // value costs a few pieces (where the frames differ), not the value again.
        let delta = |node: &str| {
            StateData::Delta(vec![NodeWrite {
                node: node.into(),
                update: raw.clone(),
            }])
        };
        let first = encode_checkpoint(&record_with(delta("a"), "x"), &mut pieces).unwrap();
        assert_eq!(first[2], 5, "stored as pieces");
        assert!(first.len() < 100, "{} bytes", first.len());
        let before = pieces.inserted;
        let second = encode_checkpoint(&record_with(delta("b"), "x"), &mut pieces).unwrap();
        let added = pieces.inserted - before;
        assert!(
            added < 4 * MAX_CHUNK,
            "{added} bytes for a value stored before"
        );
        let read = decode_checkpoint("t", uuid::Uuid::from_u128(7), &second, &pieces).unwrap();
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(record_with(delta("b"), "x")).unwrap()
        );

        // A large frontier beside a snapshot stored as pieces: both roots are named, so a
        // sweep keeps the snapshot's pieces as well as the record's.
        let snapshot = StateData::Snapshot(raw.clone());
        let both = encode_checkpoint(&record_with(snapshot, &big), &mut pieces).unwrap();
        assert_eq!(super::super::codec::chunk_roots(&both).unwrap().len(), 2);
        let mut only = Pieces::default();
        let both = encode_checkpoint(
            &record_with(StateData::Snapshot(raw.clone()), &big),
            &mut only,
        )
        .unwrap();
        let live = live_pieces("t", [both.as_slice()], &only).unwrap();
        assert_eq!(live.len(), only.map.len());
        assert!(may_hold_pieces(&both));

        // A small record is stored whole, as before.
        let small = spill(b"SG-small".to_vec(), None, &mut pieces).ok().unwrap();
        assert_eq!(small, b"SG-small");
        assert!(matches!(
            unspill(&small, &pieces),
            Ok(std::borrow::Cow::Borrowed(_))
        ));

        // A missing piece of a spilled record is reported, never read as something else.
        let victim = *only.map.keys().next().unwrap();
        only.map.remove(&victim);
        assert!(decode_checkpoint("t", uuid::Uuid::from_u128(7), &both, &only).is_err());
    }

    #[test]
    fn a_batch_reader_fetches_a_snapshot_an_index_level_at_a_time() {
        let json = String::from_utf8(messages(20_000)).unwrap();
        let raw = serde_json::value::RawValue::from_string(json).unwrap();
        let record = record_with(StateData::Snapshot(raw), "x");
        let mut stored = Pieces::default();
        let bytes = encode_checkpoint(&record, &mut stored).unwrap();
        let fetch_all = |leaves: bool, from: &Pieces| {
            let (mut have, mut asked, mut rounds) = (Pieces::default(), HashSet::new(), 0);
            loop {
                let want: Vec<ChunkHash> = pieces_to_fetch([bytes.as_slice()], &have, leaves)
                    .into_iter()
                    .filter(|h| asked.insert(*h))
                    .collect();
                if want.is_empty() {
                    return (have, rounds);
                }
                rounds += 1;
                for h in want {
                    if let Some(b) = from.map.get(&h) {
                        have.map.insert(h, b.clone());
                    }
                }
            }
        };

        // Every piece, in one round per level of the tree (2 MB: an index above the leaves).
        let (have, rounds) = fetch_all(true, &stored);
        assert_eq!(have.map.len(), stored.map.len());
        assert_eq!(rounds, 2);
        let read = decode_checkpoint("t", record.id, &bytes, &have).unwrap();
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&record).unwrap()
        );

        // Index pieces only: what a sweep reads, and it finds every live piece from them.
        let (indexes, _) = fetch_all(false, &stored);
        assert!(indexes.map.len() < stored.map.len() / 10);
        let live = live_pieces("t", [bytes.as_slice()], &indexes).unwrap();
        assert_eq!(live.len(), stored.map.len());

        // A piece the store lacks ends the fetching, and reading reports it missing.
        let mut lacking = Pieces {
            map: stored.map.clone(),
            ..Pieces::default()
        };
        let leaf = *stored
            .map
            .keys()
            .find(|h| !indexes.map.contains_key(*h))
            .unwrap();
        lacking.map.remove(&leaf);
        let (have, _) = fetch_all(true, &lacking);
        let err = decode_checkpoint("t", record.id, &bytes, &have).unwrap_err();
        assert!(err.to_string().contains("is missing"), "{err}");
    }

    /// Text that content-defined chunking cuts everywhere alike, `len` bytes of it.
    fn noise(len: usize) -> Vec<u8> {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                b'a' + (seed % 26) as u8
            })
            .collect()
    }

    #[test]
    fn a_tree_with_two_index_levels_is_marked_and_fetched_whole() {
        let data = noise(6 * 1024 * 1024);
        let mut pieces = Pieces::default();
        let root = store(&mut pieces, &data);
        assert!(root.depth >= 2, "depth {}", root.depth);
        assert_eq!(join(&pieces, &root).unwrap(), data);
        let mut live = HashSet::new();
        mark(&pieces, &root, &mut live, &mut HashSet::new()).unwrap();
        assert_eq!(live.len(), pieces.map.len());
    }

    #[test]
    fn a_large_snapshot_is_pruned_and_fetched_in_batches_whatever_its_depth() {
        let json = format!("\"{}\"", String::from_utf8(noise(6 * 1024 * 1024)).unwrap());
        let raw = serde_json::value::RawValue::from_string(json).unwrap();
        let record = record_with(StateData::Snapshot(raw), "x");
        let mut stored = Pieces::default();
        let bytes = encode_checkpoint(&record, &mut stored).unwrap();
        let live = live_pieces("t", [bytes.as_slice()], &stored).unwrap();
        assert_eq!(live.len(), stored.map.len());

        let (mut have, mut asked, mut rounds) = (Pieces::default(), HashSet::new(), 0);
        loop {
            let want: Vec<ChunkHash> = pieces_to_fetch([bytes.as_slice()], &have, true)
                .into_iter()
                .filter(|h| asked.insert(*h))
                .collect();
            if want.is_empty() {
                break;
            }
            rounds += 1;
            for h in want {
                have.map.insert(h, stored.map[&h].clone());
            }
        }
        let depth = super::super::codec::chunk_roots(&bytes).unwrap()[0].depth;
        assert!(depth >= 2, "depth {depth}");
        assert_eq!(rounds, usize::from(depth) + 1, "one round per level");
        assert_eq!(have.map.len(), stored.map.len());
        let read = decode_checkpoint("t", record.id, &bytes, &have).unwrap();
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&record).unwrap()
        );
    }
}
