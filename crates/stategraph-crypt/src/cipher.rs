//! Sealing bytes: XChaCha20-Poly1305 under the keyring's keys, bound to where the bytes belong.
//!
//! A sealed value is a *segment*, text that fits in any JSON string: `KID.BASE64`, where the
//! base64 holds the key's fingerprint (4 bytes), the nonce (24) and the ciphertext with its tag.
//! The key id lets keys rotate (a record names the key that sealed it); the fingerprint tells a
//! wrong key from an altered record.
//!
//! Every segment is bound by its associated data to a [`Binding`]: the thread, the kind of
//! record and its place (a checkpoint id, a journal key). A segment copied to another thread or
//! another record does not open.
//!
//! Nonces: random (24 bytes, so collisions are not a concern at any write rate) for everything
//! but the pieces of large snapshots, whose nonce is derived from the key, the thread and the
//! piece's content ([`Cipher::seal_by_content`]): the same piece sealed twice in one thread is
//! the same text, so the backend's content-defined pieces stay shared between snapshots. What
//! that reveals to someone holding the stored bytes but not the key: which pieces of one
//! thread's snapshots are equal (not across threads, not across keys, and not what they say:
//! the nonce is keyed, so a guess at a piece's content cannot be checked without the key).

use crate::keys::{Key, Keyring};
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, OsRng, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};

const FINGERPRINT: usize = 4;
const NONCE: usize = 24;
const TAG: usize = 16;

/// Where a sealed value belongs; it opens only at the same place.
#[derive(Clone, Copy, Debug)]
pub struct Binding<'a> {
    /// The thread (with its subgraph namespace, as the store keys it).
    pub thread: &'a str,
    /// The kind of record: `checkpoint`, `writes`, `journal`, ...
    pub kind: &'a str,
    /// The record's place within the thread: a checkpoint id, a journal key.
    pub place: &'a str,
}

impl Binding<'_> {
    fn aad(&self) -> Vec<u8> {
        let mut aad =
            Vec::with_capacity(16 + self.thread.len() + self.kind.len() + self.place.len());
        aad.extend_from_slice(b"stategraph-crypt v1\0");
        for part in [self.thread, self.kind, self.place] {
            aad.extend_from_slice(&(part.len() as u64).to_le_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }
}

/// Why a segment did not open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The key that sealed it (its id) is not configured.
    KeyMissing { key_id: String },
    /// A key with its id is configured, but another key sealed it.
    WrongKey { key_id: String },
    /// It does not authenticate: altered, cut, or moved from another place.
    Tampered { reason: String },
}

/// Why nothing could be sealed.
#[derive(Debug, thiserror::Error)]
#[error("no encryption key is configured")]
pub struct NoKey;

/// Seals and opens segments with a [`Keyring`].
///
/// ```
/// use stategraph_crypt::{Binding, Cipher, Key, Keyring, OpenError};
/// let cipher = Cipher::new(Keyring::new(vec![Key::new("k1", [9; 32])?])?);
/// let at = Binding { thread: "t1", kind: "journal", place: "note" };
/// let sealed = cipher.seal(at, b"what the user typed")?;
/// assert!(sealed.starts_with("k1."));
/// assert_eq!(cipher.open(at, &sealed), Ok(b"what the user typed".to_vec()));
/// // Moved to another thread, it does not open.
/// let elsewhere = Binding { thread: "t2", ..at };
/// assert!(matches!(cipher.open(elsewhere, &sealed), Err(OpenError::Tampered { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cipher {
    ring: Keyring,
}

impl Cipher {
    /// A cipher over these keys (the current one seals).
    pub fn new(ring: Keyring) -> Cipher {
        Cipher { ring }
    }

    /// The keys.
    pub fn keyring(&self) -> &Keyring {
        &self.ring
    }

    /// Seals `plaintext` for `at` under the current key, with a random nonce.
    pub fn seal(&self, at: Binding<'_>, plaintext: &[u8]) -> Result<String, NoKey> {
        let key = self.ring.current().ok_or(NoKey)?;
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        Ok(seal_with(key, &nonce, &at.aad(), plaintext))
    }

    /// Seals a piece of a large snapshot of `thread` with a nonce derived from the key, the
    /// thread and the content: the same piece gives the same segment (see the module doc).
    pub fn seal_by_content(&self, thread: &str, plaintext: &[u8]) -> Result<String, NoKey> {
        let key = self.ring.current().ok_or(NoKey)?;
        let aad = piece_binding(thread).aad();
        let mut hasher = blake3::Hasher::new_keyed(&key.nonce_key());
        hasher.update(&(aad.len() as u64).to_le_bytes());
        hasher.update(&aad);
        hasher.update(plaintext);
        let derived = hasher.finalize();
        let nonce = XNonce::clone_from_slice(&derived.as_bytes()[..NONCE]);
        Ok(seal_with(key, &nonce, &aad, plaintext))
    }

    /// Opens a segment sealed for `at`.
    pub fn open(&self, at: Binding<'_>, segment: &str) -> Result<Vec<u8>, OpenError> {
        self.open_aad(&at.aad(), segment)
    }

    /// Opens a piece sealed by [`Cipher::seal_by_content`].
    pub fn open_piece(&self, thread: &str, segment: &str) -> Result<Vec<u8>, OpenError> {
        self.open_aad(&piece_binding(thread).aad(), segment)
    }

    /// The id of the key that sealed a segment, without opening it.
    pub fn key_id(segment: &str) -> Option<&str> {
        segment.split_once('.').map(|(id, _)| id)
    }

    fn open_aad(&self, aad: &[u8], segment: &str) -> Result<Vec<u8>, OpenError> {
        let tampered = |reason: &str| OpenError::Tampered {
            reason: reason.to_string(),
        };
        let (key_id, body) = segment
            .split_once('.')
            .ok_or_else(|| tampered("it names no key"))?;
        let raw = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(body)
            .map_err(|_| tampered("it is not base64"))?;
        if raw.len() < FINGERPRINT + NONCE + TAG {
            return Err(tampered("it is shorter than a sealed value can be"));
        }
        let key = self.ring.get(key_id).ok_or_else(|| OpenError::KeyMissing {
            key_id: key_id.to_string(),
        })?;
        if raw[..FINGERPRINT] != key.fingerprint() {
            return Err(OpenError::WrongKey {
                key_id: key_id.to_string(),
            });
        }
        let nonce = XNonce::from_slice(&raw[FINGERPRINT..FINGERPRINT + NONCE]);
        let aead = XChaCha20Poly1305::new(key.bytes().into());
        aead.decrypt(
            nonce,
            Payload {
                msg: &raw[FINGERPRINT + NONCE..],
                aad,
            },
        )
        .map_err(|_| tampered("its authentication tag does not match"))
    }
}

fn piece_binding(thread: &str) -> Binding<'_> {
    Binding {
        thread,
        kind: "piece",
        place: "",
    }
}

fn seal_with(key: &Key, nonce: &XNonce, aad: &[u8], plaintext: &[u8]) -> String {
    let aead = XChaCha20Poly1305::new(key.bytes().into());
    // Encryption fails only past 256 GiB per message, far beyond any record.
    let ct = aead
        .encrypt(
            nonce,
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .unwrap_or_default();
    let mut raw = Vec::with_capacity(FINGERPRINT + NONCE + ct.len());
    raw.extend_from_slice(&key.fingerprint());
    raw.extend_from_slice(nonce);
    raw.extend_from_slice(&ct);
    let mut out = String::with_capacity(key.id().len() + 1 + raw.len() * 4 / 3 + 4);
    out.push_str(key.id());
    out.push('.');
    base64::engine::general_purpose::STANDARD_NO_PAD.encode_string(&raw, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher(keys: &[(&str, u8)]) -> Cipher {
        let keys = keys
            .iter()
            .map(|(id, b)| Key::new(id, [*b; 32]).unwrap())
            .collect();
        Cipher::new(Keyring::new(keys).unwrap())
    }

    const AT: Binding<'static> = Binding {
        thread: "t",
        kind: "checkpoint",
        place: "1",
    };

    #[test]
    fn random_nonces_differ_and_content_nonces_repeat() {
        let c = cipher(&[("a", 1)]);
        assert_ne!(c.seal(AT, b"x").unwrap(), c.seal(AT, b"x").unwrap());
        let p = c.seal_by_content("t", b"piece").unwrap();
        assert_eq!(p, c.seal_by_content("t", b"piece").unwrap());
        assert_ne!(p, c.seal_by_content("u", b"piece").unwrap());
        assert_eq!(c.open_piece("t", &p).unwrap(), b"piece");
        assert!(matches!(
            c.open_piece("u", &p),
            Err(OpenError::Tampered { .. })
        ));
    }

    #[test]
    fn a_missing_a_wrong_and_an_altered_key_are_told_apart() {
        let sealed = cipher(&[("a", 1)]).seal(AT, b"secret").unwrap();
        let missing = cipher(&[("b", 1)]).open(AT, &sealed);
        assert_eq!(missing, Err(OpenError::KeyMissing { key_id: "a".into() }));
        let wrong = cipher(&[("a", 2)]).open(AT, &sealed);
        assert_eq!(wrong, Err(OpenError::WrongKey { key_id: "a".into() }));
        let mut bytes = sealed.into_bytes();
        let last = bytes.len() - 3;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let altered = cipher(&[("a", 1)]).open(AT, std::str::from_utf8(&bytes).unwrap());
        assert!(
            matches!(altered, Err(OpenError::Tampered { .. })),
            "{altered:?}"
        );
    }
}
