//! The compact binary layout of a checkpoint record (frame format 2).
//!
//! A checkpoint is written at every superstep, so its envelope is most of what a thread stores:
//! as JSON, a one-message delta spent ~390 of its ~500 bytes on field names, ids spelled as text
//! and a thread id that the key already holds. Here ids are 16 raw bytes, integers are varints
//! (postcard), field names are implied by position and the thread id is left out. The JSON
//! of the state and of updates is kept verbatim: it is what the runtime decodes.
//!
//! Position-based means the layout cannot grow fields the way the JSON records can: a change
//! to it is a new frame format, and readers keep decoding the old ones. Format 3 is this layout
//! with one more way to hold a snapshot, by reference to its pieces ([`super::chunks`]); the
//! layout being otherwise the same, one decoder reads both.

use super::chunks::ChunkRoot;
use super::record::{
    CheckpointMetadata, CheckpointRecord, Frontier, NodeWrite, Source, StateData, TaskSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    id: [u8; 16],
    parent: Option<[u8; 16]>,
    step: u64,
    #[serde(borrow)]
    state: WireState<'a>,
    #[serde(borrow)]
    frontier: WireFrontier<'a>,
    #[serde(borrow)]
    metadata: WireMetadata<'a>,
}

#[derive(Serialize, Deserialize)]
enum WireState<'a> {
    /// The whole state as JSON.
    Snapshot(&'a str),
    /// (node, update as JSON), in task order.
    #[serde(borrow)]
    Delta(Vec<(&'a str, &'a str)>),
    /// The whole state, stored as pieces apart from the record (format 3 only).
    Chunked(ChunkRoot),
}

#[derive(Serialize, Deserialize)]
struct WireFrontier<'a> {
    /// (node, Send argument as JSON).
    #[serde(borrow)]
    tasks: Vec<(&'a str, Option<Cow<'a, str>>)>,
    #[serde(borrow)]
    deferred: Vec<&'a str>,
    #[serde(borrow)]
    joins: Vec<(&'a str, Vec<&'a str>)>,
}

#[derive(Serialize, Deserialize)]
struct WireMetadata<'a> {
    source: Source,
    #[serde(borrow)]
    writers: Vec<&'a str>,
    created_at_ms: u64,
    schema_version: u32,
    run_id: &'a str,
    graph: Option<&'a str>,
}

/// Why a compact record could not be written or read.
pub(crate) type CompactError = String;

/// Encodes `record` without its thread id (the caller's key holds it). With `chunked`, its
/// snapshot is stored as those pieces and the record only names them.
pub(crate) fn encode(
    record: &CheckpointRecord,
    chunked: Option<&ChunkRoot>,
    out: &mut Vec<u8>,
) -> Result<(), CompactError> {
    let state = match (&record.state, chunked) {
        (StateData::Snapshot(_), Some(root)) => WireState::Chunked(*root),
        (StateData::Snapshot(raw), None) => WireState::Snapshot(raw.get()),
        (StateData::Delta(writes), _) => WireState::Delta(
            writes
                .iter()
                .map(|w| (w.node.as_str(), w.update.get()))
                .collect(),
        ),
    };
    let tasks = record
        .frontier
        .tasks
        .iter()
        .map(|t| {
            let arg = t
                .arg
                .as_ref()
                .map(|v| serde_json::to_string(v).map(Cow::Owned))
                .transpose()
                .map_err(|e| format!("a Send argument does not encode: {e}"))?;
            Ok((t.node.as_str(), arg))
        })
        .collect::<Result<Vec<_>, CompactError>>()?;
    let wire = Wire {
        id: *record.id.as_bytes(),
        parent: record.parent_id.map(|p| *p.as_bytes()),
        step: record.step,
        state,
        frontier: WireFrontier {
            tasks,
            deferred: record
                .frontier
                .deferred
                .iter()
                .map(String::as_str)
                .collect(),
            joins: record
                .frontier
                .joins
                .iter()
                .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
                .collect(),
        },
        metadata: WireMetadata {
            source: record.metadata.source,
            writers: record.metadata.writers.iter().map(String::as_str).collect(),
            created_at_ms: record.metadata.created_at_ms,
            schema_version: record.metadata.schema_version,
            run_id: &record.metadata.run_id,
            graph: record.metadata.graph.as_deref(),
        },
    };
    postcard::to_io(&wire, out).map_err(|e| e.to_string())?;
    Ok(())
}

/// The pieces a record's snapshot is stored as, if it is.
pub(crate) fn chunk_root(bytes: &[u8]) -> Result<Option<ChunkRoot>, CompactError> {
    let wire: Wire = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    Ok(match wire.state {
        WireState::Chunked(root) => Some(root),
        _ => None,
    })
}

/// Decodes a record written by [`encode`], giving it back its thread id; `resolve` turns a
/// snapshot stored as pieces back into its JSON.
pub(crate) fn decode(
    thread: &str,
    bytes: &[u8],
    resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, CompactError>,
) -> Result<CheckpointRecord, CompactError> {
    let wire: Wire = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    let state = match wire.state {
        WireState::Snapshot(json) => StateData::Snapshot(raw(json.to_string(), "the snapshot")?),
        WireState::Chunked(root) => StateData::Snapshot(raw(resolve(&root)?, "the snapshot")?),
        WireState::Delta(writes) => StateData::Delta(
            writes
                .into_iter()
                .map(|(node, update)| {
                    Ok(NodeWrite {
                        node: node.to_string(),
                        update: raw(update.to_string(), "an update")?,
                    })
                })
                .collect::<Result<_, CompactError>>()?,
        ),
    };
    let tasks = wire
        .frontier
        .tasks
        .into_iter()
        .map(|(node, arg)| {
            let arg = arg
                .map(|a| serde_json::from_str(&a))
                .transpose()
                .map_err(|e| format!("a Send argument is not JSON: {e}"))?;
            Ok(TaskSpec {
                node: node.to_string(),
                arg,
            })
        })
        .collect::<Result<_, CompactError>>()?;
    let strings = |v: Vec<&str>| v.into_iter().map(str::to_string).collect::<Vec<_>>();
    Ok(CheckpointRecord {
        thread_id: thread.to_string(),
        id: uuid::Uuid::from_bytes(wire.id),
        parent_id: wire.parent.map(uuid::Uuid::from_bytes),
        step: wire.step,
        state,
        frontier: Frontier {
            tasks,
            deferred: strings(wire.frontier.deferred),
            joins: wire
                .frontier
                .joins
                .into_iter()
                .map(|(k, v)| (k.to_string(), strings(v)))
                .collect::<BTreeMap<_, _>>(),
        },
        metadata: CheckpointMetadata {
            source: wire.metadata.source,
            writers: strings(wire.metadata.writers),
            created_at_ms: wire.metadata.created_at_ms,
            schema_version: wire.metadata.schema_version,
            run_id: wire.metadata.run_id.to_string(),
            graph: wire.metadata.graph.map(str::to_string),
        },
    })
}

fn raw(json: String, what: &str) -> Result<Box<RawValue>, CompactError> {
    RawValue::from_string(json).map_err(|e| format!("{what} is not JSON: {e}"))
}
