//! The on-disk framing shared by every backend: a magic tag, a format, a CRC-32 of the payload
//! and its length, then the payload. A record whose frame does not check out is reported as
//! corrupt, never decoded into something else.
//!
//! Formats: 1 is JSON (every kind of record; checkpoints written before format 2 existed); 2 is
//! a checkpoint in the compact binary layout of `checkpoint/compact.rs`; 3 is the same layout for
//! a checkpoint whose snapshot is stored as pieces beside it (`checkpoint/chunks.rs`), so only a
//! backend that holds the pieces can read it; 4, what checkpoints are written as now, is a slimmer
//! layout that leaves the checkpoint's id to its key, and holds a snapshot either way; 5 is any
//! large record (a checkpoint with a large delta, a large pending write) whose frame is itself
//! stored as pieces (`chunks::spill`), so it shares them with the thread's snapshots and other
//! records: the payload is only the root of those pieces. Readers keep every format they ever
//! wrote.

use super::chunk_root::ChunkRoot;
use super::record::{CheckpointId, CheckpointRecord};
use serde::de::DeserializeOwned;
use serde::Serialize;

const MAGIC: [u8; 2] = *b"SG";
const JSON: u8 = 1;
const COMPACT_CHECKPOINT: u8 = 2;
const CHUNKED_CHECKPOINT: u8 = 3;
const SLIM_CHECKPOINT: u8 = 4;
const SPILLED: u8 = 5;
/// The newest format this build reads.
const NEWEST: u8 = SPILLED;
const HEADER: usize = 2 + 1 + 4 + 4;

/// Why a stored record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the frame says it holds.
    #[error("record is truncated: {actual} bytes where {expected} were written")]
    Truncated {
        /// Bytes the frame promised.
        expected: usize,
        /// Bytes found.
        actual: usize,
    },
    /// Not one of our records at all.
    #[error("record does not start with the stategraph tag")]
    BadMagic,
    /// Written by a newer stategraph.
    #[error(
        "record format {0} is newer than this build understands ({NEWEST}); upgrade stategraph"
    )]
    UnknownFormat(u8),
    /// The bytes changed since they were written.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Checksum {
        /// The checksum in the frame.
        stored: u32,
        /// The checksum of the bytes found.
        computed: u32,
    },
    /// The frame checked out but the JSON inside does not fit the record type.
    #[error("record does not decode: {0}")]
    Decode(String),
    /// A value could not be encoded.
    #[error("record does not encode: {0}")]
    Encode(String),
}

/// Frames `value` as checksummed JSON.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; HEADER];
    serde_json::to_writer(&mut out, value).map_err(|e| FrameError::Encode(e.to_string()))?;
    seal(out, JSON)
}

/// Frames a checkpoint in the compact layout. Its thread id and id are left out: every backend
/// keeps them in the record's key, and gives them back to [`decode_checkpoint`].
pub fn encode_checkpoint(record: &CheckpointRecord) -> Result<Vec<u8>, FrameError> {
    encode_checkpoint_with(record, None)
}

/// Frames a checkpoint whose snapshot, when `chunked` is given, is stored as those pieces.
pub(crate) fn encode_checkpoint_with(
    record: &CheckpointRecord,
    chunked: Option<&ChunkRoot>,
) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(HEADER + super::compact::size_hint(record, chunked));
    out.resize(HEADER, 0);
    super::compact::encode(record, chunked, &mut out).map_err(FrameError::Encode)?;
    seal(out, SLIM_CHECKPOINT)
}

/// Checks a frame and decodes the checkpoint in it, in whichever format it was written, giving
/// it back the thread and id it is stored under. A checkpoint whose snapshot is stored as pieces
/// is refused: read it through the store that holds them.
pub fn decode_checkpoint(
    thread: &str,
    id: CheckpointId,
    bytes: &[u8],
) -> Result<CheckpointRecord, FrameError> {
    decode_checkpoint_with(thread, id, bytes, &mut |_| {
        Err("its snapshot is stored as pieces beside it; read it through its store".into())
    })
}

/// Checks a frame and decodes the checkpoint in it; `resolve` reads a snapshot stored as pieces.
pub(crate) fn decode_checkpoint_with(
    thread: &str,
    id: CheckpointId,
    bytes: &[u8],
    resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, String>,
) -> Result<CheckpointRecord, FrameError> {
    let record: CheckpointRecord = match open(bytes)? {
        (SLIM_CHECKPOINT, body) => {
            return super::compact::decode(thread, id, body, resolve).map_err(FrameError::Decode)
        }
        (COMPACT_CHECKPOINT | CHUNKED_CHECKPOINT, body) => {
            super::compact::decode_with_id(thread, body, resolve).map_err(FrameError::Decode)?
        }
        (JSON, body) => {
            serde_json::from_slice(body).map_err(|e| FrameError::Decode(e.to_string()))?
        }
        (SPILLED, _) => return Err(stored_as_pieces()),
        // `open` only passes known formats; naming each keeps a new one from being read as JSON.
        (format, _) => return Err(FrameError::UnknownFormat(format)),
    };
    // An older record names itself: one filed under another id was moved, or its key damaged.
    if record.id != id {
        return Err(FrameError::Decode(format!(
            "the record stored as checkpoint {id} is checkpoint {}",
            record.id
        )));
    }
    Ok(record)
}

/// Frames a checkpoint as formats 2 and 3 did (3 with `chunked`), for tests that they still
/// read.
#[cfg(test)]
pub(crate) fn encode_checkpoint_as_before(
    record: &CheckpointRecord,
    chunked: Option<&ChunkRoot>,
) -> Vec<u8> {
    let mut out = vec![0u8; HEADER];
    super::compact::encode_with_id(record, chunked, &mut out).expect("a test record encodes");
    let format = if chunked.is_some() {
        CHUNKED_CHECKPOINT
    } else {
        COMPACT_CHECKPOINT
    };
    seal(out, format).expect("a test record fits a frame")
}

/// The pieces a stored record names: a checkpoint's snapshot kept as pieces, a record kept as
/// pieces as a whole (format 5), or both (a spilled checkpoint whose snapshot is in pieces).
pub(crate) fn chunk_roots(bytes: &[u8]) -> Result<Vec<ChunkRoot>, FrameError> {
    let (format, body) = open(bytes)?;
    let slim = match format {
        CHUNKED_CHECKPOINT => false,
        SLIM_CHECKPOINT => true,
        SPILLED => {
            let (outer, inner) = spilled_body(body)?;
            return Ok([Some(outer), inner].into_iter().flatten().collect());
        }
        _ => return Ok(Vec::new()),
    };
    super::compact::chunk_root(body, slim)
        .map(|root| root.into_iter().collect())
        .map_err(FrameError::Decode)
}

fn stored_as_pieces() -> FrameError {
    FrameError::Decode("the record is stored as pieces; read it through its store".into())
}

/// Frames a record that is stored as the pieces under `root` (format 5); `inner` is the root of
/// the pieces the record itself names (its snapshot's), kept here so a sweep finds them without
/// reading the record back.
pub(crate) fn encode_spilled(
    root: &ChunkRoot,
    inner: Option<&ChunkRoot>,
) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; HEADER];
    for r in std::iter::once(root).chain(inner) {
        out.extend_from_slice(&r.hash);
        out.push(r.depth);
        out.extend_from_slice(&r.len.to_le_bytes());
    }
    seal(out, SPILLED)
}

/// The root of the pieces a record is stored as, when it is stored that way (format 5); `None`
/// for a record stored whole. Only a format-5 frame is checked, so asking costs nothing for a
/// large record stored whole.
pub(crate) fn spilled_root(bytes: &[u8]) -> Result<Option<ChunkRoot>, FrameError> {
    if bytes.len() < HEADER || bytes[0..2] != MAGIC || bytes[2] != SPILLED {
        return Ok(None);
    }
    let (_, body) = open(bytes)?;
    spilled_body(body).map(|(outer, _)| Some(outer))
}

/// A root is its hash (16 bytes), its depth (1) and its length (8, little-endian).
const ROOT: usize = 16 + 1 + 8;

fn spilled_body(body: &[u8]) -> Result<(ChunkRoot, Option<ChunkRoot>), FrameError> {
    let bad = || FrameError::Decode(format!("a root of pieces of {} bytes", body.len()));
    let root = |at: usize| -> Result<ChunkRoot, FrameError> {
        let r = body.get(at..at + ROOT).ok_or_else(bad)?;
        let mut hash = [0u8; 16];
        hash.copy_from_slice(&r[..16]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&r[17..]);
        Ok(ChunkRoot {
            hash,
            depth: r[16],
            len: u64::from_le_bytes(len),
        })
    };
    match body.len() {
        ROOT => Ok((root(0)?, None)),
        l if l == 2 * ROOT => Ok((root(0)?, Some(root(ROOT)?))),
        _ => Err(bad()),
    }
}

/// Fills in the header of `out`, whose first `HEADER` bytes were reserved for it.
fn seal(mut out: Vec<u8>, format: u8) -> Result<Vec<u8>, FrameError> {
    let payload_len = u32::try_from(out.len() - HEADER).map_err(|_| {
        FrameError::Encode(format!(
            "a record of {} bytes is over the 4 GiB a frame can hold",
            out.len()
        ))
    })?;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = format;
    out[3..7].copy_from_slice(&crc.to_le_bytes());
    out[7..11].copy_from_slice(&payload_len.to_le_bytes());
    Ok(out)
}

/// Checks a frame and decodes its JSON.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload(bytes)?).map_err(|e| FrameError::Decode(e.to_string()))
}

/// Checks a JSON frame and returns its payload.
pub fn payload(bytes: &[u8]) -> Result<&[u8], FrameError> {
    match open(bytes)? {
        (JSON, body) => Ok(body),
        (SPILLED, _) => Err(stored_as_pieces()),
        (format, _) => Err(FrameError::Decode(format!(
            "a record in format {format} (a checkpoint) where a JSON record was expected"
        ))),
    }
}

/// Checks a frame of any known format and returns its format and payload.
fn open(bytes: &[u8]) -> Result<(u8, &[u8]), FrameError> {
    if bytes.len() < HEADER {
        return Err(FrameError::Truncated {
            expected: HEADER,
            actual: bytes.len(),
        });
    }
    if bytes[0..2] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    let format = bytes[2];
    if !(JSON..=NEWEST).contains(&format) {
        return Err(FrameError::UnknownFormat(format));
    }
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let stored = word(3);
    let len = word(7) as usize;
    if bytes.len() - HEADER < len {
        return Err(FrameError::Truncated {
            expected: HEADER + len,
            actual: bytes.len(),
        });
    }
    let body = &bytes[HEADER..HEADER + len];
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(FrameError::Checksum { stored, computed });
    }
    Ok((format, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_every_kind_of_damage() {
        let bytes = encode(&vec![1u32, 2, 3]).unwrap();
        assert_eq!(decode::<Vec<u32>>(&bytes).unwrap(), vec![1, 2, 3]);

        let truncated = &bytes[..bytes.len() - 1];
        assert!(matches!(
            decode::<Vec<u32>>(truncated),
            Err(FrameError::Truncated { .. })
        ));

        let mut flipped = bytes.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0x01;
        assert!(matches!(
            decode::<Vec<u32>>(&flipped),
            Err(FrameError::Checksum { .. })
        ));

        assert!(matches!(
            decode::<Vec<u32>>(b"{}"),
            Err(FrameError::Truncated { .. })
        ));
        assert!(matches!(
            decode::<Vec<u32>>(b"XXxxxxxxxxx[]"),
            Err(FrameError::BadMagic)
        ));
        assert!(matches!(
            decode::<String>(&bytes),
            Err(FrameError::Decode(_))
        ));
    }

    fn full_record() -> CheckpointRecord {
        use crate::{CheckpointMetadata, Frontier, NodeWrite, Source, StateData, TaskSpec};
        let raw = |v: serde_json::Value| serde_json::value::to_raw_value(&v).unwrap();
        CheckpointRecord {
            thread_id: "thread-1".into(),
            id: uuid::Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0042),
            parent_id: Some(uuid::Uuid::from_u128(41)),
            step: 300,
            state: StateData::Delta(vec![
                NodeWrite {
                    node: "a".into(),
                    update: raw(serde_json::json!({"messages": ["hé \"quoted\""]})),
                },
                NodeWrite {
                    node: "b".into(),
                    update: raw(serde_json::json!({"count": {"$overwrite": 3}})),
                },
            ]),
            frontier: Frontier {
                tasks: vec![
                    TaskSpec {
                        node: "map".into(),
                        arg: Some(serde_json::json!({"doc": 1, "tags": [true, null]})),
                    },
                    TaskSpec {
                        node: "reduce".into(),
                        arg: None,
                    },
                ],
                deferred: vec!["summarize".into()],
                joins: [("join:x".to_string(), vec!["a".to_string(), "b".to_string()])]
                    .into_iter()
                    .collect(),
            },
            metadata: CheckpointMetadata {
                source: Source::Update,
                writers: vec!["a".into(), "b".into()],
                created_at_ms: 1_795_330_137_945,
                schema_version: 3,
                run_id: "run-7".into(),
                graph: Some("research".into()),
            },
        }
    }

    fn same(a: &CheckpointRecord, b: &CheckpointRecord) {
        // Records hold raw JSON, which has no PartialEq: compare their JSON forms.
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
    }

    #[test]
    fn a_compact_checkpoint_round_trips_every_field_and_gets_its_thread_and_id_back() {
        let record = full_record();
        let bytes = encode_checkpoint(&record).unwrap();
        assert_eq!(bytes[2], SLIM_CHECKPOINT);
        same(
            &decode_checkpoint("thread-1", record.id, &bytes).unwrap(),
            &record,
        );

        let snapshot = CheckpointRecord {
            state: crate::StateData::Snapshot(
                serde_json::value::to_raw_value(&serde_json::json!({"messages": []})).unwrap(),
            ),
            parent_id: None,
            ..full_record()
        };
        let bytes = encode_checkpoint(&snapshot).unwrap();
        same(
            &decode_checkpoint("thread-1", snapshot.id, &bytes).unwrap(),
            &snapshot,
        );
    }

    #[test]
    fn writers_and_run_ids_read_back_as_written_whichever_way_they_are_stored() {
        let uuid = "0193a0b1-c2d3-7e4f-8a9b-0c1d2e3f4a5b";
        let cases: [(&[&str], &str); 6] = [
            (&["a", "b"], uuid),
            (&["b", "a"], uuid),
            (&["a"], uuid),
            (&[], uuid),
            (&["a", "b"], "0193A0B1-C2D3-7E4F-8A9B-0C1D2E3F4A5B"),
            (&["a", "b"], "run-7"),
        ];
        for (writers, run_id) in cases {
            let mut record = full_record();
            record.metadata.writers = writers.iter().map(|w| w.to_string()).collect();
            record.metadata.run_id = run_id.to_string();
            let bytes = encode_checkpoint(&record).unwrap();
            same(
                &decode_checkpoint("thread-1", record.id, &bytes).unwrap(),
                &record,
            );
        }
        // A snapshot names its writers: it has no delta to take them from.
        let mut snapshot = full_record();
        snapshot.state = crate::StateData::Snapshot(
            serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap(),
        );
        let bytes = encode_checkpoint(&snapshot).unwrap();
        same(
            &decode_checkpoint("thread-1", snapshot.id, &bytes).unwrap(),
            &snapshot,
        );
    }

    fn format_2(record: &CheckpointRecord) -> Vec<u8> {
        let bytes = encode_checkpoint_as_before(record, None);
        assert_eq!(bytes[2], COMPACT_CHECKPOINT);
        bytes
    }

    #[test]
    fn checkpoints_written_in_older_formats_still_read() {
        let record = full_record();
        let json = encode(&record).unwrap();
        assert_eq!(json[2], JSON);
        same(
            &decode_checkpoint("thread-1", record.id, &json).unwrap(),
            &record,
        );
        same(
            &decode_checkpoint("thread-1", record.id, &format_2(&record)).unwrap(),
            &record,
        );
    }

    #[test]
    fn an_older_record_stored_under_another_id_is_reported() {
        let record = full_record();
        let elsewhere = uuid::Uuid::from_u128(7);
        for bytes in [encode(&record).unwrap(), format_2(&record)] {
            let err = decode_checkpoint("thread-1", elsewhere, &bytes).unwrap_err();
            assert!(
                matches!(&err, FrameError::Decode(m) if m.contains(&record.id.to_string())),
                "{err}"
            );
        }
    }

    #[test]
    fn a_damaged_compact_checkpoint_is_reported_not_read() {
        let record = full_record();
        let id = record.id;
        let bytes = encode_checkpoint(&record).unwrap();
        for at in [HEADER, HEADER + 20, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(matches!(
                decode_checkpoint("thread-1", id, &flipped),
                Err(FrameError::Checksum { .. })
            ));
        }
        assert!(matches!(
            decode_checkpoint("thread-1", id, &bytes[..bytes.len() - 3]),
            Err(FrameError::Truncated { .. })
        ));
        let mut future = bytes.clone();
        future[2] = NEWEST + 1;
        assert!(matches!(
            decode_checkpoint("thread-1", id, &future),
            Err(FrameError::UnknownFormat(_))
        ));
        // A frame whose checksum holds but whose body is cut short still fails to decode.
        let mut short = bytes[..HEADER].to_vec();
        short.extend_from_slice(&bytes[HEADER..HEADER + 10]);
        let resealed = seal(short, SLIM_CHECKPOINT).unwrap();
        assert!(matches!(
            decode_checkpoint("thread-1", id, &resealed),
            Err(FrameError::Decode(_))
        ));
        // And a checkpoint is never taken for a JSON record.
        assert!(matches!(
            decode::<serde_json::Value>(&bytes),
            Err(FrameError::Decode(_))
        ));
    }

    #[test]
    fn the_compact_envelope_of_a_one_message_delta_is_small() {
        let mut record = full_record();
        record.state = crate::StateData::Delta(vec![crate::NodeWrite {
            node: "agent".into(),
            update: serde_json::value::to_raw_value(&serde_json::json!({"messages": ["x"]}))
                .unwrap(),
        }]);
        record.frontier.tasks.truncate(1);
        record.frontier.tasks[0].arg = None;
        record.metadata.writers = vec!["agent".into()];
        record.metadata.run_id = "0193a0b1-c2d3-7e4f-8a9b-0c1d2e3f4a5b".into();
        let slim = encode_checkpoint(&record).unwrap().len();
        let json = encode(&record).unwrap().len();
        assert!(slim * 2 < json, "{slim} compact vs {json} JSON bytes");
        // Format 4 leaves out the id (16 bytes), the writers (6) and 20 of the run id's 37.
        let format_2 = format_2(&record).len();
        assert_eq!(format_2 - slim, 16 + 6 + 20, "{slim} vs {format_2} bytes");
    }

    /// Stored bytes outlive the code that wrote them. Format 4's were written by 64697e9,
    /// format 2's by e40de32, the last build that wrote that format. Each must still decode, and
    /// today's encoders must write the same bytes, so a layout change cannot slip in without a
    /// new format number.
    const FORMAT_4_DELTA: &[&str] = &[
        "5347040f01bee4b10000000100000000000000000000000000000029ac02010201611f7b226d657373616765",
        "73223a5b2268c3a9205c2271756f7465645c22225d7d01621a7b22636f756e74223a7b22246f766572777269",
        "7465223a337d7d02036d6170011c7b22646f63223a312c2274616773223a5b747275652c6e756c6c5d7d0672",
        "656475636500010973756d6d6172697a6501066a6f696e3a7802016101620200d9be8f90a03403010572756e",
        "2d3701087265736561726368",
    ];
    /// A snapshot, whose writers are named, with a UUID run id.
    const FORMAT_4_SNAPSHOT: &[&str] = &[
        "534704dc4a2534900000000100000000000000000000000000000029ac02000f7b226e223a5b312c2274776f",
        "225d7d02036d6170011c7b22646f63223a312c2274616773223a5b747275652c6e756c6c5d7d067265647563",
        "6500010973756d6d6172697a6501066a6f696e3a78020161016202010201610162d9be8f90a03403000193a0",
        "b1c2d37e4f8a9b0c1d2e3f4a5b01087265736561726368",
    ];
    const FORMAT_2_DELTA: &[&str] = &[
        "53470210100377c4000000019300000000700080000000000000420100000000000000000000000000000029",
        "ac02010201611f7b226d65737361676573223a5b2268c3a9205c2271756f7465645c22225d7d01621a7b2263",
        "6f756e74223a7b22246f7665727772697465223a337d7d02036d6170011c7b22646f63223a312c2274616773",
        "223a5b747275652c6e756c6c5d7d0672656475636500010973756d6d6172697a6501066a6f696e3a78020161",
        "0162020201610162d9be8f90a034030572756e2d3701087265736561726368",
    ];

    fn unhex(lines: &[&str]) -> Vec<u8> {
        let hex = lines.concat();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn records_written_by_earlier_builds_read_and_today_s_encoder_writes_the_same_bytes() {
        let delta = full_record();
        let mut snapshot = full_record();
        snapshot.state = crate::StateData::Snapshot(
            serde_json::value::to_raw_value(&serde_json::json!({"n": [1, "two"]})).unwrap(),
        );
        snapshot.metadata.run_id = "0193a0b1-c2d3-7e4f-8a9b-0c1d2e3f4a5b".into();
        for (stored, record, format) in [
            (FORMAT_4_DELTA, &delta, SLIM_CHECKPOINT),
            (FORMAT_4_SNAPSHOT, &snapshot, SLIM_CHECKPOINT),
            (FORMAT_2_DELTA, &delta, COMPACT_CHECKPOINT),
        ] {
            let bytes = unhex(stored);
            assert_eq!(bytes[2], format);
            same(
                &decode_checkpoint("thread-1", record.id, &bytes).unwrap(),
                record,
            );
            let written = if format == SLIM_CHECKPOINT {
                encode_checkpoint(record).unwrap()
            } else {
                encode_checkpoint_as_before(record, None)
            };
            assert_eq!(written, bytes, "format {format}");
        }
    }
}
