//! Encryption at rest for stategraph: every record a checkpointer stores for a thread is sealed
//! before it reaches the backend, with XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`),
//! under keys that rotate.
//!
//! One job: records sealed on the way in, opened on the way out. A backend under
//! [`EncryptedCheckpointer`] (or, for long-term store items, [`EncryptedStore`]) stores sealed
//! records as it stores any other and never sees a key.
//!
//! # Layout
//! - `keys.rs`: [`Key`], [`Keyring`] (the current key first, older ones after) and where keys
//!   come from: `GRAPH_ENCRYPTION_KEY` (`ID:BASE64,ID:BASE64` or one bare `BASE64`) or the file
//!   `GRAPH_ENCRYPTION_KEY_FILE` names.
//! - `cipher.rs`: [`Cipher`] seals bytes into a segment (`KID.BASE64`) bound to a [`Binding`]
//!   (thread, kind of record, place), and opens it, telling a missing key, a wrong key and an
//!   altered record apart ([`OpenError`]). A reusable piece: a long-term store's items can be
//!   sealed with it as well.
//! - `envelope.rs`: [`Envelope`], how a sealed value sits in a stored record.
//! - `records.rs`: checkpoints, pending writes and journal values sealed and opened.
//! - `checkpointer.rs`: [`EncryptedCheckpointer`], the wrapper.
//! - `rekey.rs`: [`EncryptedCheckpointer::rekey`] and its [`RekeyReport`]: a thread's
//!   checkpoints, pending writes and journal entries sealed again under the newest key.
//! - `store.rs`: [`EncryptedStore`], the long-term store's wrapper: each item's value sealed
//!   and bound to its namespace and key (namespace, key, times and TTL stay clear so the
//!   backend can list and expire); a search with field filters is filtered here after
//!   opening, and text search belongs to an `IndexedStore` put above it, whose index then
//!   lives in memory only. [`rekey_items`] seals a store's items again under the current key.
//!
//! # What is sealed, and what stays in the clear
//! Sealed: states, updates, Send arguments, interrupt payloads and answers, error messages,
//! recorded calls (the journal). In the clear, because a backend keys, orders or lists by them:
//! thread and checkpoint ids, parents, steps, checkpoint metadata (source, writers, time,
//! schema version, run id, graph name), the frontier's node names, a pending write's task, node
//! and kind, an interrupt's id, and leases. Each sealed value is bound to its thread, its kind
//! and its place (a checkpoint id, a write's task, a journal key): moved, it does not open.
//! A clear copy is never what a read returns: the sealed record is.
//!
//! # Large snapshots and shared pieces
//! The backends cut large snapshots into pieces named by their hash and share them between a
//! thread's snapshots, so storage grows with what changed. Sealed whole with a random nonce,
//! every snapshot would be new bytes: nothing shared. So a snapshot from
//! [`PIECES_FROM`](records::PIECES_FROM) bytes is cut by content here first and each piece is
//! sealed with a nonce derived from the key, the thread and the piece (convergent): an
//! unchanged piece seals to the same text, and the backend's pieces over it stay shared.
//! *Kept*: sharing between the snapshots of one thread (a snapshot of a grown state stores its
//! changed end, about four times what it stores in plaintext, since a sealed piece is larger
//! than a backend piece). *Lost*: a large delta or pending write is sealed whole with a random
//! nonce, so it no longer shares pieces with the snapshot that repeats it; and everything takes
//! about 4/3 of its plaintext size (base64 in JSON). *Leaked* to someone with the store's bytes
//! and not the key: which pieces of one thread's snapshots are equal (not across threads or
//! keys; a guessed content cannot be confirmed, the nonce being keyed).
//!
//! # Keys and rotation
//! New records are sealed with the first key; a record names the key that sealed it, so records
//! under older keys open while those keys are configured. [`EncryptedCheckpointer::rekey`]
//! seals a thread's records (checkpoints, pending writes, journal entries) again under the
//! first key, after which the old key can go, even for a thread paused mid-step. A record
//! whose key is missing or wrong is a [`CheckpointError::Sealed`] naming the thread and the key
//! (never garbage, never "damaged"); an altered one is the same error with
//! [`SealFault::Tampered`].
//!
//! [`CheckpointError::Sealed`]: stategraph_checkpoint::CheckpointError::Sealed
//! [`SealFault::Tampered`]: stategraph_checkpoint::SealFault::Tampered

// Library code never prints: it returns what it has to say.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod checkpointer;
mod cipher;
mod envelope;
mod keys;
pub mod records;
mod rekey;
mod store;

pub use checkpointer::EncryptedCheckpointer;
pub use cipher::{Binding, Cipher, NoKey, OpenError};
pub use envelope::{Envelope, MARK};
pub use keys::{Key, KeyError, Keyring, KEY_FILE_VAR, KEY_VAR};
pub use rekey::RekeyReport;
pub use store::{rekey_items, EncryptedStore, ItemsRekeyReport};
