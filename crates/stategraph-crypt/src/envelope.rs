//! How a sealed value sits in a stored record: a JSON object `{"$sealed": [SEGMENT, ...]}`
//! (see `cipher.rs` for a segment), with `"copy_of": N` on a pending write that `rekey` sealed
//! again under a newer key (it stands for the thread's N-th write at that checkpoint).
//!
//! The object takes the place of the value it hides (a state, an update, a payload), so the
//! record keeps its shape and every backend stores it as it stores any record. A value that
//! is not such an object is plaintext.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The key that marks a sealed value.
pub const MARK: &str = "$sealed";

/// A sealed value as stored: its segments (one, or a head and the pieces of a large snapshot).
///
/// ```
/// use stategraph_crypt::Envelope;
/// let env = Envelope { segments: vec!["k1.AAAA".into()], copy_of: None };
/// let raw = env.to_raw();
/// assert_eq!(raw.get(), r#"{"$sealed":["k1.AAAA"]}"#);
/// assert_eq!(Envelope::from_raw(&raw), Some(env));
/// assert_eq!(Envelope::from_value(&serde_json::json!({"text": "plain"})), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The sealed segments, the head first.
    #[serde(rename = "$sealed")]
    pub segments: Vec<String>,
    /// For a pending write sealed again by `rekey`: which of the checkpoint's writes it stands
    /// for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_of: Option<u32>,
}

impl Envelope {
    /// One segment.
    pub fn one(segment: String) -> Envelope {
        Envelope {
            segments: vec![segment],
            copy_of: None,
        }
    }

    /// As stored JSON.
    pub fn to_raw(&self) -> Box<RawValue> {
        // Strings and an integer always serialize.
        RawValue::from_string(serde_json::to_string(self).unwrap_or_default())
            .unwrap_or_else(|_| RawValue::from_string("null".into()).unwrap_or_default())
    }

    /// As a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The envelope a stored value is, or `None` when it is plaintext.
    pub fn from_raw(raw: &RawValue) -> Option<Envelope> {
        let text = raw.get().trim_start();
        // Cheap test first: a state of megabytes is not parsed to learn it is plaintext.
        if !text.starts_with("{\"$sealed\"") {
            return None;
        }
        serde_json::from_str(text).ok()
    }

    /// The envelope a stored JSON value is, or `None` when it is plaintext.
    pub fn from_value(value: &serde_json::Value) -> Option<Envelope> {
        match value {
            serde_json::Value::Object(m) if m.contains_key(MARK) => {
                serde_json::from_value(value.clone()).ok()
            }
            _ => None,
        }
    }

    /// The envelope a stored string is (an error message's place), or `None`.
    pub fn from_text(text: &str) -> Option<Envelope> {
        if !text.starts_with("{\"$sealed\"") {
            return None;
        }
        serde_json::from_str(text).ok()
    }

    /// The id of the key that sealed it (its head's).
    pub fn key_id(&self) -> Option<&str> {
        self.segments
            .first()
            .and_then(|s| crate::cipher::Cipher::key_id(s))
    }
}
