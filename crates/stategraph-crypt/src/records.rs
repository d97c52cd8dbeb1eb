//! Records sealed and opened: checkpoints, pending writes, journal values.
//!
//! A sealed record keeps what a backend needs to key, order and summarise it in the clear
//! (thread, checkpoint and parent ids, step, metadata, the frontier's node names, a write's
//! task, node and kind, an interrupt's id) and seals what users and models wrote in its place
//! (states, updates, Send arguments, interrupt payloads, answers, error messages, recorded
//! calls). The sealed value is bound to a digest of the clear part, so a clear field altered in
//! the store makes the record fail to open (tampered) rather than read differently.
//!
//! A large value (from [`PIECES_FROM`] bytes) is cut by content and each piece sealed by
//! content (`Cipher::seal_by_content`), after a head sealed with a random nonce that holds the
//! hash and length of the whole; so the backend's shared pieces stay shared between snapshots,
//! and with a large update that the next snapshot repeats (see the crate doc for what that
//! keeps and loses).

use crate::cipher::{Binding, Cipher, OpenError};
use crate::envelope::{Envelope, MARK};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use stategraph_checkpoint::{
    CheckpointError, CheckpointId, CheckpointMetadata, CheckpointRecord, Frontier, NodeWrite,
    PendingKind, PendingWrite, SealFault, StateData, TaskSpec,
};

/// Snapshots from this size are sealed piece by piece; sealed they take about 4/3 of it, past
/// the size from which the built-in backends share pieces
/// ([`CHUNKED_FROM`](stategraph_checkpoint::chunks::CHUNKED_FROM)).
pub const PIECES_FROM: usize = stategraph_checkpoint::chunks::CHUNKED_FROM * 3 / 4;
const MIN_PIECE: usize = 4 * 1024;
const AVG_PIECE: usize = 8 * 1024;
const MAX_PIECE: usize = 32 * 1024;

/// What the pieces of a large sealed value add up to: its BLAKE3 hash and length, so pieces
/// swapped, dropped or taken from another value are caught.
#[derive(Serialize, Deserialize)]
struct Pieces {
    hash: String,
    len: u64,
}

/// The error for a record that does not open.
pub(crate) fn fault(thread: &str, what: &str, e: OpenError) -> CheckpointError {
    let (fault, detail) = match e {
        OpenError::KeyMissing { key_id } => (
            SealFault::KeyMissing,
            format!(
                "{what} is encrypted with key `{key_id}`, which is not among the configured \
                 encryption keys; configure that key (beside the current one) to read it"
            ),
        ),
        OpenError::WrongKey { key_id } => (
            SealFault::WrongKey,
            format!(
                "{what} is encrypted with key `{key_id}`, and the key configured under that id \
                 is a different key; configure the key that was used then"
            ),
        ),
        OpenError::Tampered { reason } => (
            SealFault::Tampered,
            format!(
                "{what} was altered after it was encrypted ({reason}); it is not read. Older \
                 checkpoints may still be intact"
            ),
        ),
    };
    CheckpointError::Sealed {
        thread: thread.to_string(),
        fault,
        detail,
    }
}

pub(crate) fn not_sealed(thread: &str, what: &str) -> CheckpointError {
    CheckpointError::Sealed {
        thread: thread.to_string(),
        fault: SealFault::NotSealed,
        detail: format!(
            "{what} is stored unencrypted while encryption is on; it is not read as it could \
             have been put there by anyone with access to the store. Rewrite the thread under \
             the current key (rekey, which reads unencrypted records) to encrypt it"
        ),
    }
}

fn no_key(thread: &str) -> CheckpointError {
    CheckpointError::Sealed {
        thread: thread.to_string(),
        fault: SealFault::KeyMissing,
        detail: "no encryption key is configured to encrypt its records".into(),
    }
}

fn raw(text: String) -> Result<Box<RawValue>, CheckpointError> {
    RawValue::from_string(text).map_err(CheckpointError::storage)
}

fn tampered(thread: &str, what: &str, reason: &str) -> CheckpointError {
    fault(
        thread,
        what,
        OpenError::Tampered {
            reason: reason.into(),
        },
    )
}

/// A digest of a record's clear part, which the sealed part is bound to.
fn digest<T: Serialize>(clear: &T) -> Result<String, CheckpointError> {
    let bytes = serde_json::to_vec(clear).map_err(CheckpointError::storage)?;
    Ok(blake3::hash(&bytes).to_hex().to_string())
}

/// Where a sealed value belongs, and how it was sealed (`mode`): the associated data.
struct Place<'a> {
    thread: &'a str,
    kind: &'a str,
    place: String,
}

impl Place<'_> {
    fn binding<'b>(&'b self, full: &'b str) -> Binding<'b> {
        Binding {
            thread: self.thread,
            kind: self.kind,
            place: full,
        }
    }
}

/// Seals `plain` (a large one by pieces). `mode` says what the plaintext is; it is bound too.
fn seal_bytes(
    cipher: &Cipher,
    at: &Place<'_>,
    mode: &str,
    plain: &[u8],
    copy_of: Option<u32>,
) -> Result<Envelope, CheckpointError> {
    let no_key = || no_key(at.thread);
    if plain.len() < PIECES_FROM {
        let full = format!("{}|{mode}|whole", at.place);
        let segment = cipher
            .seal(at.binding(&full), plain)
            .map_err(|_| no_key())?;
        return Ok(Envelope {
            segments: vec![segment],
            copy_of,
        });
    }
    let full = format!("{}|{mode}|pieces", at.place);
    let sum = Pieces {
        hash: blake3::hash(plain).to_hex().to_string(),
        len: plain.len() as u64,
    };
    let head = serde_json::to_vec(&sum).map_err(CheckpointError::storage)?;
    let mut segments = vec![cipher
        .seal(at.binding(&full), &head)
        .map_err(|_| no_key())?];
    for c in fastcdc::v2020::FastCDC::new(plain, MIN_PIECE, AVG_PIECE, MAX_PIECE) {
        let piece = &plain[c.offset..c.offset + c.length];
        segments.push(
            cipher
                .seal_by_content(at.thread, piece)
                .map_err(|_| no_key())?,
        );
    }
    Ok(Envelope { segments, copy_of })
}

/// Opens what [`seal_bytes`] sealed.
fn open_bytes(
    cipher: &Cipher,
    at: &Place<'_>,
    mode: &str,
    env: &Envelope,
    what: &str,
) -> Result<Vec<u8>, CheckpointError> {
    let thread = at.thread;
    let (head, pieces) = env
        .segments
        .split_first()
        .ok_or_else(|| tampered(thread, what, "it holds no sealed value"))?;
    if pieces.is_empty() {
        let full = format!("{}|{mode}|whole", at.place);
        return cipher
            .open(at.binding(&full), head)
            .map_err(|e| fault(thread, what, e));
    }
    let full = format!("{}|{mode}|pieces", at.place);
    let head = cipher
        .open(at.binding(&full), head)
        .map_err(|e| fault(thread, what, e))?;
    let sum: Pieces = serde_json::from_slice(&head)
        .map_err(|_| tampered(thread, what, "its head is not a list of pieces"))?;
    let mut plain = Vec::with_capacity(usize::try_from(sum.len).unwrap_or(0));
    for p in pieces {
        let piece = cipher
            .open_piece(thread, p)
            .map_err(|e| fault(thread, what, e))?;
        plain.extend_from_slice(&piece);
    }
    if plain.len() as u64 != sum.len || blake3::hash(&plain).to_hex().as_str() != sum.hash {
        return Err(tampered(
            thread,
            what,
            "its pieces do not add up to what was sealed",
        ));
    }
    Ok(plain)
}

/// A checkpoint's clear part, which its sealed state is bound to.
#[derive(Serialize)]
struct CheckpointClear<'a> {
    id: CheckpointId,
    parent_id: Option<CheckpointId>,
    step: u64,
    snapshot: bool,
    frontier: &'a Frontier,
    metadata: &'a CheckpointMetadata,
}

/// What a checkpoint seals when its frontier carries Send arguments.
#[derive(Serialize, Deserialize)]
struct StateAndArgs {
    state: StateData,
    args: Vec<Option<serde_json::Value>>,
}

fn clear_frontier(frontier: &Frontier) -> Frontier {
    // The node names stay for the backend's listing (done or not); Send arguments are users'
    // data and exist only sealed (a `null` marks a task that has one).
    Frontier {
        tasks: (frontier.tasks.iter())
            .map(|t| TaskSpec {
                node: t.node.clone(),
                arg: t.arg.as_ref().map(|_| serde_json::Value::Null),
            })
            .collect(),
        deferred: frontier.deferred.clone(),
        joins: frontier.joins.clone(),
    }
}

fn checkpoint_place(
    record: &CheckpointRecord,
    frontier: &Frontier,
) -> Result<Place<'static>, CheckpointError> {
    let clear = CheckpointClear {
        id: record.id,
        parent_id: record.parent_id,
        step: record.step,
        snapshot: record.state.is_snapshot(),
        frontier,
        metadata: &record.metadata,
    };
    Ok(Place {
        thread: "",
        kind: "checkpoint",
        place: format!("{}|{}", record.id, digest(&clear)?),
    })
}

/// Seals a checkpoint for the backend.
pub(crate) fn seal_checkpoint(
    cipher: &Cipher,
    record: &CheckpointRecord,
) -> Result<CheckpointRecord, CheckpointError> {
    let frontier = clear_frontier(&record.frontier);
    let mut at = checkpoint_place(record, &frontier)?;
    at.thread = &record.thread_id;
    let has_args = record.frontier.tasks.iter().any(|t| t.arg.is_some());
    let env = if has_args {
        let body = StateAndArgs {
            state: record.state.clone(),
            args: record
                .frontier
                .tasks
                .iter()
                .map(|t| t.arg.clone())
                .collect(),
        };
        let plain = serde_json::to_vec(&body).map_err(CheckpointError::storage)?;
        seal_bytes(cipher, &at, "args", &plain, None)?
    } else {
        match &record.state {
            StateData::Snapshot(json) => {
                seal_bytes(cipher, &at, "snapshot", json.get().as_bytes(), None)?
            }
            StateData::Delta(writes) => {
                let plain = serde_json::to_vec(writes).map_err(CheckpointError::storage)?;
                seal_bytes(cipher, &at, "delta", &plain, None)?
            }
        }
    };
    let state = if record.state.is_snapshot() {
        StateData::Snapshot(env.to_raw())
    } else {
        StateData::Delta(vec![NodeWrite {
            node: MARK.to_string(),
            update: env.to_raw(),
        }])
    };
    Ok(CheckpointRecord {
        thread_id: record.thread_id.clone(),
        id: record.id,
        parent_id: record.parent_id,
        step: record.step,
        state,
        frontier,
        metadata: record.metadata.clone(),
    })
}

/// The envelope a stored checkpoint holds, or `None` for a plaintext one.
pub(crate) fn checkpoint_envelope(stored: &CheckpointRecord) -> Option<Envelope> {
    match &stored.state {
        StateData::Snapshot(raw) => Envelope::from_raw(raw),
        StateData::Delta(writes) => match writes.as_slice() {
            [only] if only.node == MARK => Envelope::from_raw(&only.update),
            _ => None,
        },
    }
}

/// Opens a stored checkpoint of `thread`.
pub(crate) fn open_checkpoint(
    cipher: &Cipher,
    thread: &str,
    env: &Envelope,
    stored: CheckpointRecord,
) -> Result<CheckpointRecord, CheckpointError> {
    let what = format!("checkpoint {}", stored.id);
    let mut at = checkpoint_place(&stored, &stored.frontier)?;
    at.thread = thread;
    let bad = |reason: &str| tampered(thread, &what, reason);
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|_| bad("it is not UTF-8"));
    let mut frontier = stored.frontier;
    // Which mode it was sealed in is bound in the associated data; its clear shape says which.
    let state = if frontier.tasks.iter().any(|t| t.arg.is_some()) {
        let plain = open_bytes(cipher, &at, "args", env, &what)?;
        let body: StateAndArgs =
            serde_json::from_slice(&plain).map_err(|_| bad("its sealed state does not read"))?;
        if body.args.len() != frontier.tasks.len() {
            return Err(bad("its Send arguments do not match its tasks"));
        }
        for (task, arg) in frontier.tasks.iter_mut().zip(body.args) {
            task.arg = arg;
        }
        body.state
    } else if stored.state.is_snapshot() {
        let plain = open_bytes(cipher, &at, "snapshot", env, &what)?;
        StateData::Snapshot(raw(text(plain)?).map_err(|_| bad("its state is not JSON"))?)
    } else {
        let plain = open_bytes(cipher, &at, "delta", env, &what)?;
        StateData::Delta(
            serde_json::from_slice(&plain).map_err(|_| bad("its sealed delta does not read"))?,
        )
    };
    Ok(CheckpointRecord {
        thread_id: thread.to_string(),
        id: stored.id,
        parent_id: stored.parent_id,
        step: stored.step,
        state,
        frontier,
        metadata: stored.metadata,
    })
}

/// A pending write with its sealed slot emptied: its clear part.
fn write_clear(write: &PendingWrite) -> PendingWrite {
    let kind = match &write.kind {
        PendingKind::Update { .. } => PendingKind::Update {
            update: RawValue::NULL.to_owned(),
            goto: Vec::new(),
        },
        PendingKind::Error { .. } => PendingKind::Error {
            message: String::new(),
        },
        PendingKind::Interrupt(r) => {
            let mut r = r.clone();
            r.payload = serde_json::Value::Null;
            PendingKind::Interrupt(r)
        }
        PendingKind::Resume {
            interrupt_id,
            ordinal,
            ..
        } => PendingKind::Resume {
            interrupt_id: interrupt_id.clone(),
            ordinal: *ordinal,
            value: serde_json::Value::Null,
        },
    };
    PendingWrite {
        task: write.task,
        node: write.node.clone(),
        kind,
    }
}

fn write_place<'a>(
    thread: &'a str,
    checkpoint: CheckpointId,
    clear: &PendingWrite,
    copy_of: Option<u32>,
) -> Result<Place<'a>, CheckpointError> {
    let copy = copy_of.map(|n| format!("|copy-of-{n}")).unwrap_or_default();
    Ok(Place {
        thread,
        kind: "writes",
        place: format!("{checkpoint}|{}{copy}", digest(clear)?),
    })
}

/// What a pending write seals: the update (with its command's destinations), the error
/// message, the interrupt's payload or the answer.
#[derive(Serialize, Deserialize)]
struct UpdateAndGoto {
    update: Box<RawValue>,
    goto: Vec<stategraph_checkpoint::GotoRecord>,
}

/// Seals a pending write (`copy_of`: see [`Envelope::copy_of`]).
pub(crate) fn seal_write(
    cipher: &Cipher,
    thread: &str,
    checkpoint: CheckpointId,
    write: &PendingWrite,
    copy_of: Option<u32>,
) -> Result<PendingWrite, CheckpointError> {
    let mut stored = write_clear(write);
    let at = write_place(thread, checkpoint, &stored, copy_of)?;
    let json = |v: &serde_json::Value| serde_json::to_vec(v).map_err(CheckpointError::storage);
    let env = match &write.kind {
        // A large update alone is sealed as its own JSON, whose pieces are then the state's.
        PendingKind::Update { update, goto } if goto.is_empty() => {
            seal_bytes(cipher, &at, "update", update.get().as_bytes(), copy_of)?
        }
        PendingKind::Update { update, goto } => {
            let body = UpdateAndGoto {
                update: update.clone(),
                goto: goto.clone(),
            };
            let plain = serde_json::to_vec(&body).map_err(CheckpointError::storage)?;
            seal_bytes(cipher, &at, "goto", &plain, copy_of)?
        }
        PendingKind::Error { message } => {
            seal_bytes(cipher, &at, "error", message.as_bytes(), copy_of)?
        }
        PendingKind::Interrupt(r) => {
            seal_bytes(cipher, &at, "interrupt", &json(&r.payload)?, copy_of)?
        }
        PendingKind::Resume { value, .. } => {
            seal_bytes(cipher, &at, "resume", &json(value)?, copy_of)?
        }
    };
    // The kind and the ids stay, for the backend's listing (paused, failed); what the task
    // produced, asked or was told is sealed in their place.
    match &mut stored.kind {
        PendingKind::Update { update, .. } => *update = env.to_raw(),
        PendingKind::Error { message } => *message = env.to_raw().get().to_string(),
        PendingKind::Interrupt(r) => r.payload = env.to_value(),
        PendingKind::Resume { value, .. } => *value = env.to_value(),
    }
    Ok(stored)
}

/// The envelope a stored pending write holds, or `None` for a plaintext one.
pub(crate) fn write_envelope(stored: &PendingWrite) -> Option<Envelope> {
    match &stored.kind {
        PendingKind::Update { update, .. } => Envelope::from_raw(update),
        PendingKind::Error { message } => Envelope::from_text(message),
        PendingKind::Interrupt(r) => Envelope::from_value(&r.payload),
        PendingKind::Resume { value, .. } => Envelope::from_value(value),
    }
}

/// Opens a stored pending write.
pub(crate) fn open_write(
    cipher: &Cipher,
    thread: &str,
    checkpoint: CheckpointId,
    env: &Envelope,
    stored: &PendingWrite,
) -> Result<PendingWrite, CheckpointError> {
    let what = format!("a pending write of checkpoint {checkpoint}");
    let bad = |reason: &str| tampered(thread, &what, reason);
    let mut out = write_clear(stored);
    let at = write_place(thread, checkpoint, &out, env.copy_of)?;
    let value = |plain: Vec<u8>| {
        serde_json::from_slice::<serde_json::Value>(&plain).map_err(|_| bad("it is not JSON"))
    };
    match &mut out.kind {
        PendingKind::Update { update, goto } => {
            // Which of the two it was is bound in the associated data: a command's
            // destinations are rare, so the plain update is tried first.
            match open_bytes(cipher, &at, "update", env, &what) {
                Ok(plain) => {
                    let text = String::from_utf8(plain).map_err(|_| bad("it is not UTF-8"))?;
                    *update = RawValue::from_string(text).map_err(|_| bad("it is not JSON"))?;
                }
                Err(CheckpointError::Sealed {
                    fault: SealFault::Tampered,
                    ..
                }) => {
                    let plain = open_bytes(cipher, &at, "goto", env, &what)?;
                    let body: UpdateAndGoto =
                        serde_json::from_slice(&plain).map_err(|_| bad("it does not read"))?;
                    *update = body.update;
                    *goto = body.goto;
                }
                Err(e) => return Err(e),
            }
        }
        PendingKind::Error { message } => {
            let plain = open_bytes(cipher, &at, "error", env, &what)?;
            *message = String::from_utf8(plain).map_err(|_| bad("it is not UTF-8"))?;
        }
        PendingKind::Interrupt(r) => {
            r.payload = value(open_bytes(cipher, &at, "interrupt", env, &what)?)?;
        }
        PendingKind::Resume { value: v, .. } => {
            *v = value(open_bytes(cipher, &at, "resume", env, &what)?)?;
        }
    }
    Ok(out)
}

/// Seals a journal value.
pub(crate) fn seal_journal(
    cipher: &Cipher,
    thread: &str,
    key: &str,
    value: &serde_json::Value,
) -> Result<serde_json::Value, CheckpointError> {
    let at = Place {
        thread,
        kind: "journal",
        place: key.to_string(),
    };
    let plain = serde_json::to_vec(value).map_err(CheckpointError::storage)?;
    Ok(seal_bytes(cipher, &at, "value", &plain, None)?.to_value())
}

/// Opens a stored journal value.
pub(crate) fn open_journal(
    cipher: &Cipher,
    thread: &str,
    key: &str,
    env: &Envelope,
) -> Result<serde_json::Value, CheckpointError> {
    let what = format!("journal entry `{key}`");
    let at = Place {
        thread,
        kind: "journal",
        place: key.to_string(),
    };
    let plain = open_bytes(cipher, &at, "value", env, &what)?;
    serde_json::from_slice(&plain).map_err(|_| tampered(thread, &what, "it is not JSON"))
}
