//! The compact binary layouts of a checkpoint record (frame formats 2 to 4).
//!
//! A checkpoint is written at every superstep, so its envelope is most of what a thread stores:
//! as JSON, a one-message delta spent ~390 of its ~500 bytes on field names, ids spelled as text
//! and a thread id that the key already holds. Here ids are 16 raw bytes, integers are varints
//! (postcard), field names are implied by position and the thread id is left out. The JSON
//! of the state and of updates is kept verbatim: it is what the runtime decodes.
//!
//! Position-based means the layout cannot grow fields the way the JSON records can: a change
//! to it is a new frame format, and readers keep decoding the old ones.
//! - Format 2 ([`Wire`]) is the first layout.
//! - Format 3 is format 2 with one more way to hold a snapshot, by reference to its pieces
//!   ([`super::chunks`]); one decoder reads both.
//! - Format 4 ([`SlimWire`]), written now, also leaves out what the reader knows already: the
//!   checkpoint's id (its key holds it), the writers when they are the delta's nodes, and a run
//!   id spelled as 36 characters of text when it is a UUID's 16 bytes. A one-message delta of
//!   the loop workload went from 231 to 190 bytes, and sled's log, which holds about twice
//!   what it stores, shrinks with it.

use super::chunk_root::ChunkRoot;
use super::record::{
    CheckpointId, CheckpointMetadata, CheckpointRecord, Frontier, NodeWrite, Source, StateData,
    TaskSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What formats 2 to 4 share, in this order. `M` is the metadata's layout: besides format 2's
/// leading id, the one place they differ.
#[derive(Serialize, Deserialize)]
struct Body<'a, M> {
    parent: Option<[u8; 16]>,
    step: u64,
    #[serde(borrow)]
    state: WireState<'a>,
    #[serde(borrow)]
    frontier: WireFrontier<'a>,
    metadata: M,
}

/// Format 4: the body with [`SlimMetadata`].
type SlimWire<'a> = Body<'a, SlimMetadata<'a>>;

/// Formats 2 and 3, read and no longer written (but by tests, to check they still read): the
/// checkpoint's id, then the body with [`WireMetadata`]. postcard writes a tuple's elements
/// one after another, as it writes a struct's fields, so these are the bytes of the one struct
/// format 2 was first defined as.
type Wire<'a> = ([u8; 16], Body<'a, WireMetadata<'a>>);

#[derive(Serialize, Deserialize)]
struct SlimMetadata<'a> {
    source: Source,
    #[serde(borrow)]
    writers: Writers<'a>,
    created_at_ms: u64,
    schema_version: u32,
    #[serde(borrow)]
    run_id: RunId<'a>,
    graph: Option<&'a str>,
}

/// The nodes that wrote a step.
#[derive(Serialize, Deserialize)]
enum Writers<'a> {
    /// The nodes of the record's delta, in its order: what a step's writers nearly always are.
    OfTheDelta,
    #[serde(borrow)]
    Named(Vec<&'a str>),
}

/// A run id: the runtime's are UUIDs, a caller's may be any text.
#[derive(Serialize, Deserialize)]
enum RunId<'a> {
    /// A UUID that reads back as the same text (hyphenated, lower case).
    Uuid([u8; 16]),
    Text(&'a str),
}

#[derive(Serialize, Deserialize)]
enum WireState<'a> {
    /// The whole state as JSON.
    Snapshot(&'a str),
    /// (node, update as JSON), in task order.
    #[serde(borrow)]
    Delta(Vec<(&'a str, &'a str)>),
    /// The whole state, stored as pieces apart from the record (formats 3 and 4).
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

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
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

/// Encodes `record` in format 4, without its thread id and id (the caller's key holds them).
/// With `chunked`, its snapshot is stored as those pieces and the record only names them.
pub(crate) fn encode(
    record: &CheckpointRecord,
    chunked: Option<&ChunkRoot>,
    out: &mut Vec<u8>,
) -> Result<(), CompactError> {
    let writers = match &record.state {
        StateData::Delta(writes)
            if writes.iter().map(|w| w.node.as_str()).eq(record
                .metadata
                .writers
                .iter()
                .map(String::as_str)) =>
        {
            Writers::OfTheDelta
        }
        _ => Writers::Named(record.metadata.writers.iter().map(String::as_str).collect()),
    };
    let run_id = &record.metadata.run_id;
    // Checked against the text it reads back as, formatted on the stack: this runs per step.
    let mut spelled = uuid::Uuid::encode_buffer();
    let run_id = match uuid::Uuid::try_parse(run_id) {
        Ok(u) if u.hyphenated().encode_lower(&mut spelled) == run_id.as_str() => {
            RunId::Uuid(*u.as_bytes())
        }
        _ => RunId::Text(run_id),
    };
    let metadata = SlimMetadata {
        source: record.metadata.source,
        writers,
        created_at_ms: record.metadata.created_at_ms,
        schema_version: record.metadata.schema_version,
        run_id,
        graph: record.metadata.graph.as_deref(),
    };
    let wire: SlimWire = body(record, chunked, metadata)?;
    append(&wire, out)
}

/// Appends `value`'s postcard bytes to `out`. Through `postcard::to_io` every byte was a
/// `write_all` and the frame grew by doubling: two thirds of encoding a small checkpoint.
fn append<T: Serialize>(value: &T, out: &mut Vec<u8>) -> Result<(), CompactError> {
    *out = postcard::to_extend(value, std::mem::take(out)).map_err(|e| e.to_string())?;
    Ok(())
}

/// About how many bytes [`encode`] writes for `record`: the JSON it holds verbatim plus its
/// names and a little for the rest, so the frame is allocated once.
pub(crate) fn size_hint(record: &CheckpointRecord, chunked: Option<&ChunkRoot>) -> usize {
    let names = |v: &[String]| v.iter().map(|n| n.len() + 2).sum::<usize>();
    let state = match (&record.state, chunked) {
        (StateData::Snapshot(_), Some(_)) => 32,
        (StateData::Snapshot(raw), None) => raw.get().len() + 5,
        (StateData::Delta(writes), _) => writes
            .iter()
            .map(|w| w.node.len() + w.update.get().len() + 6)
            .sum(),
    };
    let tasks: usize = record
        .frontier
        .tasks
        .iter()
        .map(|t| t.node.len() + 2 + t.arg.as_ref().map_or(0, |_| 64))
        .sum();
    let joins: usize = record
        .frontier
        .joins
        .iter()
        .map(|(k, v)| k.len() + 2 + names(v))
        .sum();
    let metadata = names(&record.metadata.writers)
        + record.metadata.run_id.len()
        + record.metadata.graph.as_ref().map_or(0, |g| g.len() + 2);
    // Parent id, step, tags, lengths, source, time and version: under 64 bytes.
    64 + state + tasks + names(&record.frontier.deferred) + joins + metadata
}

fn body<'a, M>(
    record: &'a CheckpointRecord,
    chunked: Option<&ChunkRoot>,
    metadata: M,
) -> Result<Body<'a, M>, CompactError> {
    Ok(Body {
        parent: record.parent_id.map(|p| *p.as_bytes()),
        step: record.step,
        state: wire_state(&record.state, chunked),
        frontier: wire_frontier(&record.frontier)?,
        metadata,
    })
}

fn wire_state<'a>(state: &'a StateData, chunked: Option<&ChunkRoot>) -> WireState<'a> {
    match (state, chunked) {
        (StateData::Snapshot(_), Some(root)) => WireState::Chunked(*root),
        (StateData::Snapshot(raw), None) => WireState::Snapshot(raw.get()),
        (StateData::Delta(writes), _) => WireState::Delta(
            writes
                .iter()
                .map(|w| (w.node.as_str(), w.update.get()))
                .collect(),
        ),
    }
}

fn wire_frontier(frontier: &Frontier) -> Result<WireFrontier<'_>, CompactError> {
    let tasks = frontier
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
    Ok(WireFrontier {
        tasks,
        deferred: frontier.deferred.iter().map(String::as_str).collect(),
        joins: frontier
            .joins
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect(),
    })
}

/// The pieces a record's snapshot is stored as, if it is; `slim` says the record is format 4.
pub(crate) fn chunk_root(bytes: &[u8], slim: bool) -> Result<Option<ChunkRoot>, CompactError> {
    let state = if slim {
        postcard::from_bytes::<SlimWire>(bytes)
            .map_err(|e| e.to_string())?
            .state
    } else {
        postcard::from_bytes::<Wire>(bytes)
            .map_err(|e| e.to_string())?
            .1
            .state
    };
    Ok(match state {
        WireState::Chunked(root) => Some(root),
        _ => None,
    })
}

/// Decodes a record written in format 4 by [`encode`], giving it back its thread id and id;
/// `resolve` turns a snapshot stored as pieces back into its JSON.
pub(crate) fn decode(
    thread: &str,
    id: CheckpointId,
    bytes: &[u8],
    resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, CompactError>,
) -> Result<CheckpointRecord, CompactError> {
    let wire: SlimWire = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    let metadata = wire.metadata.read(&wire.state)?;
    wire.into_record(thread, id, metadata, resolve)
}

/// Decodes a record written in format 2 or 3, which holds its own id.
pub(crate) fn decode_with_id(
    thread: &str,
    bytes: &[u8],
    resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, CompactError>,
) -> Result<CheckpointRecord, CompactError> {
    let (id, wire): Wire = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    let metadata = wire.metadata.read();
    wire.into_record(thread, uuid::Uuid::from_bytes(id), metadata, resolve)
}

impl<M> Body<'_, M> {
    /// The record, once its metadata has been read in its format's way.
    fn into_record(
        self,
        thread: &str,
        id: CheckpointId,
        metadata: CheckpointMetadata,
        resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, CompactError>,
    ) -> Result<CheckpointRecord, CompactError> {
        Ok(CheckpointRecord {
            thread_id: thread.to_string(),
            id,
            parent_id: self.parent.map(uuid::Uuid::from_bytes),
            step: self.step,
            state: state_of(self.state, resolve)?,
            frontier: frontier_of(self.frontier)?,
            metadata,
        })
    }
}

impl SlimMetadata<'_> {
    /// `state` is the record's: the writers may be its delta's nodes.
    fn read(&self, state: &WireState<'_>) -> Result<CheckpointMetadata, CompactError> {
        let writers = match &self.writers {
            Writers::OfTheDelta => match state {
                WireState::Delta(writes) => {
                    writes.iter().map(|(node, _)| node.to_string()).collect()
                }
                _ => return Err("its writers are those of a delta it does not hold".into()),
            },
            Writers::Named(names) => strings(names),
        };
        let run_id = match self.run_id {
            RunId::Uuid(bytes) => uuid::Uuid::from_bytes(bytes).hyphenated().to_string(),
            RunId::Text(text) => text.to_string(),
        };
        Ok(CheckpointMetadata {
            source: self.source,
            writers,
            created_at_ms: self.created_at_ms,
            schema_version: self.schema_version,
            run_id,
            graph: self.graph.map(str::to_string),
        })
    }
}

impl WireMetadata<'_> {
    fn read(&self) -> CheckpointMetadata {
        CheckpointMetadata {
            source: self.source,
            writers: strings(&self.writers),
            created_at_ms: self.created_at_ms,
            schema_version: self.schema_version,
            run_id: self.run_id.to_string(),
            graph: self.graph.map(str::to_string),
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn state_of(
    state: WireState<'_>,
    resolve: &mut dyn FnMut(&ChunkRoot) -> Result<String, CompactError>,
) -> Result<StateData, CompactError> {
    Ok(match state {
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
    })
}

fn frontier_of(frontier: WireFrontier<'_>) -> Result<Frontier, CompactError> {
    let tasks = frontier
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
    Ok(Frontier {
        tasks,
        deferred: strings(&frontier.deferred),
        joins: frontier
            .joins
            .into_iter()
            .map(|(k, v)| (k.to_string(), strings(&v)))
            .collect::<BTreeMap<_, _>>(),
    })
}

/// Encodes `record` as format 2 (or 3, with `chunked`) did, for tests that old records read.
#[cfg(test)]
pub(crate) fn encode_with_id(
    record: &CheckpointRecord,
    chunked: Option<&ChunkRoot>,
    out: &mut Vec<u8>,
) -> Result<(), CompactError> {
    let metadata = WireMetadata {
        source: record.metadata.source,
        writers: record.metadata.writers.iter().map(String::as_str).collect(),
        created_at_ms: record.metadata.created_at_ms,
        schema_version: record.metadata.schema_version,
        run_id: &record.metadata.run_id,
        graph: record.metadata.graph.as_deref(),
    };
    let wire: Wire = (*record.id.as_bytes(), body(record, chunked, metadata)?);
    append(&wire, out)
}

fn raw(json: String, what: &str) -> Result<Box<RawValue>, CompactError> {
    RawValue::from_string(json).map_err(|e| format!("{what} is not JSON: {e}"))
}
