//! Keys and where they come from: `GRAPH_ENCRYPTION_KEY` or `GRAPH_ENCRYPTION_KEY_FILE`.
//!
//! The syntax, in the variable or the file: one or more entries separated by commas or
//! newlines, each `ID:BASE64` or a bare `BASE64` (32 bytes, standard base64, padded or not).
//! **The first entry is the current key**: new records are sealed with it; the others are older
//! keys, kept so what they sealed still opens. Rotating is putting a new key first; once every
//! thread is rewritten under it (`rekey`), the old one can go. A bare key gets the id `k` and
//! eight hex digits derived from the key itself, so the same key always has the same id. In a
//! file, `#` starts a comment.

use base64::Engine as _;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The environment variable holding the key list.
pub const KEY_VAR: &str = "GRAPH_ENCRYPTION_KEY";
/// The environment variable naming a file that holds the key list.
pub const KEY_FILE_VAR: &str = "GRAPH_ENCRYPTION_KEY_FILE";

/// One key: its id (stored in every record it seals) and its 32 bytes (wiped when dropped).
#[derive(Clone)]
pub struct Key {
    id: String,
    bytes: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself: a Debug print ends up in logs.
        f.debug_struct("Key").field("id", &self.id).finish()
    }
}

impl Key {
    /// A key with an id of your choosing (letters, digits, `-` and `_`, at most 32).
    ///
    /// ```
    /// let key = stategraph_crypt::Key::new("2026-12", [7u8; 32]).unwrap();
    /// assert_eq!(key.id(), "2026-12");
    /// ```
    pub fn new(id: &str, bytes: [u8; 32]) -> Result<Key, KeyError> {
        let ok = !id.is_empty()
            && id.len() <= 32
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(KeyError::BadId { id: id.to_string() });
        }
        Ok(Key {
            id: id.to_string(),
            bytes: Zeroizing::new(bytes),
        })
    }

    /// A key whose id is derived from the key (`k` and eight hex digits).
    ///
    /// ```
    /// let a = stategraph_crypt::Key::derived_id([1u8; 32]);
    /// assert_eq!(a.id(), stategraph_crypt::Key::derived_id([1u8; 32]).id());
    /// ```
    pub fn derived_id(bytes: [u8; 32]) -> Key {
        let tag = blake3::derive_key("stategraph-crypt key id v1", &bytes);
        let id: String = tag[..4].iter().map(|b| format!("{b:02x}")).collect();
        Key {
            id: format!("k{id}"),
            bytes: Zeroizing::new(bytes),
        }
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// Four bytes that tell this key from another with the same id, stored beside the id so a
    /// wrong key is reported as such rather than as tampering. They reveal nothing of the key.
    pub(crate) fn fingerprint(&self) -> [u8; 4] {
        let tag = blake3::derive_key("stategraph-crypt key fingerprint v1", &self.bytes[..]);
        [tag[0], tag[1], tag[2], tag[3]]
    }

    /// The subkey that derives the nonce of a piece sealed by content (see `cipher.rs`).
    pub(crate) fn nonce_key(&self) -> [u8; 32] {
        blake3::derive_key("stategraph-crypt piece nonce v1", &self.bytes[..])
    }
}

/// The configured keys: the current one first, then older ones that still open records.
#[derive(Clone, Debug, Default)]
pub struct Keyring {
    keys: Vec<Key>,
}

impl Keyring {
    /// A keyring from keys, the current one first. Ids must differ.
    ///
    /// ```
    /// use stategraph_crypt::{Key, Keyring};
    /// let ring = Keyring::new(vec![Key::new("new", [2; 32])?, Key::new("old", [1; 32])?])?;
    /// assert_eq!(ring.current().unwrap().id(), "new");
    /// # Ok::<(), stategraph_crypt::KeyError>(())
    /// ```
    pub fn new(keys: Vec<Key>) -> Result<Keyring, KeyError> {
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.id == k.id) {
                return Err(KeyError::DuplicateId { id: k.id.clone() });
            }
        }
        Ok(Keyring { keys })
    }

    /// No key: records are written unencrypted, and a sealed one read is a clear error.
    pub fn none() -> Keyring {
        Keyring::default()
    }

    /// Parses a key list (see the module's syntax).
    ///
    /// ```
    /// let list = "new:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=,old:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    /// let ring = stategraph_crypt::Keyring::parse(list).unwrap();
    /// assert_eq!(ring.ids(), vec!["new", "old"]);
    /// ```
    pub fn parse(list: &str) -> Result<Keyring, KeyError> {
        let mut keys = Vec::new();
        for line in list.lines() {
            let line = line.split('#').next().unwrap_or("");
            for entry in line.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                keys.push(parse_entry(entry)?);
            }
        }
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Keyring::new(keys)
    }

    /// The keys the environment configures: `GRAPH_ENCRYPTION_KEY`, or the file
    /// `GRAPH_ENCRYPTION_KEY_FILE` names; [`Keyring::none`] when neither is set. Both set is an
    /// error (which one would win is not obvious to the person who set them).
    pub fn from_env() -> Result<Keyring, KeyError> {
        let var = std::env::var(KEY_VAR).ok().filter(|v| !v.trim().is_empty());
        let file = std::env::var_os(KEY_FILE_VAR).filter(|v| !v.is_empty());
        match (var, file) {
            (Some(_), Some(_)) => Err(KeyError::BothSet),
            (Some(list), None) => Keyring::parse(&list).map_err(|e| e.within(KEY_VAR)),
            (None, Some(path)) => Keyring::from_file(Path::new(&path)),
            (None, None) => Ok(Keyring::none()),
        }
    }

    /// The keys a key file holds (same syntax; `#` comments).
    pub fn from_file(path: &Path) -> Result<Keyring, KeyError> {
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| KeyError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?);
        Keyring::parse(&text).map_err(|e| e.within(&path.display().to_string()))
    }

    /// The key new records are sealed with; `None` when no key is configured.
    pub fn current(&self) -> Option<&Key> {
        self.keys.first()
    }

    /// The key with this id, if configured.
    pub fn get(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// The configured ids, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// True when no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn parse_entry(entry: &str) -> Result<Key, KeyError> {
    let (id, b64) = match entry.split_once(':') {
        Some((id, b64)) => (Some(id.trim()), b64.trim()),
        None => (None, entry),
    };
    let shown = id.unwrap_or("(no id)").to_string();
    let raw = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(b64))
            .map_err(|_| KeyError::NotBase64 { id: shown.clone() })?,
    );
    let bytes: [u8; 32] = raw.as_slice().try_into().map_err(|_| KeyError::Length {
        id: shown,
        len: raw.len(),
    })?;
    match id {
        Some(id) => Key::new(id, bytes),
        None => Ok(Key::derived_id(bytes)),
    }
}

/// A key list that cannot be used. Never echoes a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// An entry whose key is not base64.
    #[error("encryption key {id}: not base64 (give 32 random bytes in base64, e.g. from `head -c 32 /dev/urandom | base64`)")]
    NotBase64 { id: String },
    /// A key that is not 32 bytes long.
    #[error("encryption key {id}: {len} bytes where 32 are needed (e.g. `head -c 32 /dev/urandom | base64`)")]
    Length { id: String, len: usize },
    /// An id with characters other than letters, digits, `-` and `_`, or too long.
    #[error("encryption key id `{id}`: use 1 to 32 letters, digits, `-` or `_`")]
    BadId { id: String },
    /// Two keys with one id.
    #[error("encryption key id `{id}` is given twice: each key needs its own id")]
    DuplicateId { id: String },
    /// A list with no key in it.
    #[error("no encryption key in the list: give ID:BASE64 entries separated by commas")]
    Empty,
    /// Both variables are set.
    #[error("both {KEY_VAR} and {KEY_FILE_VAR} are set: set one of them")]
    BothSet,
    /// The key file cannot be read.
    #[error("the encryption key file {} cannot be read: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    /// One of the above, with where the list came from.
    #[error("{source_name}: {inner}")]
    In {
        source_name: String,
        inner: Box<KeyError>,
    },
}

impl KeyError {
    fn within(self, source_name: &str) -> KeyError {
        KeyError::In {
            source_name: source_name.to_string(),
            inner: Box::new(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

    #[test]
    fn lists_and_bare_keys_parse_with_the_current_key_first() {
        let ring = Keyring::parse(&format!("# rotated in December\nnew:{K1}\n k0 : {K1}")).unwrap();
        assert_eq!(ring.ids(), vec!["new", "k0"]);
        let bare = Keyring::parse(K1).unwrap();
        assert_eq!(bare.ids(), vec![Key::derived_id([1; 32]).id()]);
    }

    #[test]
    fn bad_lists_say_what_is_wrong_without_the_key() {
        let short = Keyring::parse("a:AQID").unwrap_err().to_string();
        assert!(short.contains("3 bytes where 32"), "{short}");
        assert!(matches!(
            Keyring::parse("a:%%%"),
            Err(KeyError::NotBase64 { .. })
        ));
        assert!(matches!(
            Keyring::parse(&format!("a:{K1},a:{K1}")),
            Err(KeyError::DuplicateId { .. })
        ));
        assert!(matches!(Keyring::parse(" , "), Err(KeyError::Empty)));
        assert!(!format!("{:?}", Keyring::parse(K1).unwrap()).contains("AQEB"));
    }
}
