//! The on-disk framing shared by every backend: a magic tag, a format version, a CRC-32 of the
//! payload and its length, then the JSON payload. A record whose frame does not check out is
//! reported as corrupt, never decoded into something else.

use serde::de::DeserializeOwned;
use serde::Serialize;

const MAGIC: [u8; 2] = *b"SG";
const FORMAT: u8 = 1;
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
        "record format {0} is newer than this build understands ({FORMAT}); upgrade stategraph"
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
    let payload_len = out.len() - HEADER;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = FORMAT;
    out[3..7].copy_from_slice(&crc.to_le_bytes());
    out[7..11].copy_from_slice(&(payload_len as u32).to_le_bytes());
    Ok(out)
}

/// Checks a frame and decodes its JSON.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload(bytes)?).map_err(|e| FrameError::Decode(e.to_string()))
}

/// Checks a frame and returns its payload.
pub fn payload(bytes: &[u8]) -> Result<&[u8], FrameError> {
    if bytes.len() < HEADER {
        return Err(FrameError::Truncated {
            expected: HEADER,
            actual: bytes.len(),
        });
    }
    if bytes[0..2] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    if bytes[2] != FORMAT {
        return Err(FrameError::UnknownFormat(bytes[2]));
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
    Ok(body)
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
}
