//! The on-disk record format of a segment file: a 16-byte header (body
//! length u32 LE, id u64 LE, CRC32C u32 LE over the id bytes and the body),
//! then the body.
//!
//! Owns only the bytes of one record: encoding into a caller's buffer and
//! decoding with an explicit body-size limit. It does no IO and knows
//! nothing of files, segments, queues or Raft.

use thiserror::Error;

/// Bytes in a record header: body length (4), id (8), checksum (4).
pub const HEADER_BYTES: usize = 16;

/// Why a byte string is not a valid record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// Fewer bytes than the header, or than the header says the body has.
    #[error("record truncated: {needed_bytes} bytes needed, {available_bytes} available")]
    Truncated {
        /// Bytes the record needs (header, or header plus body).
        needed_bytes: u64,
        /// Bytes that were there.
        available_bytes: u64,
    },
    /// The header's body length is over the caller's limit; nothing was
    /// allocated or sliced from it.
    #[error("record body of {body_bytes} bytes is over the limit of {max_body_bytes}")]
    TooLarge {
        /// The length the header claims.
        body_bytes: u64,
        /// The caller's limit.
        max_body_bytes: u64,
    },
    /// The checksum over id and body does not match the header's.
    #[error("record checksum mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    Checksum {
        /// The checksum in the header.
        expected: u32,
        /// The checksum of the bytes read.
        actual: u32,
    },
}

/// A decoded record header; the body has not been checked yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Body length in bytes, already checked against the caller's limit.
    pub body_bytes: u32,
    /// The record's id.
    pub id: u64,
    /// The checksum over the id bytes and the body.
    pub crc: u32,
}

/// A record decoded from a byte slice: its id and a borrowed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's id.
    pub id: u64,
    /// The body, checked against the checksum.
    pub body: &'a [u8],
}

/// The checksum of a record: CRC32C over the id's LE bytes, then the body.
pub fn checksum(id: u64, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&id.to_le_bytes()), body)
}

/// Bytes a record with a body of `body_bytes` takes on disk.
pub fn encoded_bytes(body_bytes: u32) -> u64 {
    HEADER_BYTES as u64 + u64::from(body_bytes)
}

/// Appends the record (header, then body) to `out`. The caller has checked
/// that the body fits in a u32 and under its own limit; a longer body is a
/// bug, not an operating error.
pub fn encode(out: &mut Vec<u8>, id: u64, body: &[u8]) {
    let body_bytes = u32::try_from(body.len()).unwrap_or(u32::MAX);
    debug_assert_eq!(body_bytes as usize, body.len(), "body over u32::MAX bytes");
    out.reserve(HEADER_BYTES + body.len());
    out.extend_from_slice(&body_bytes.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&checksum(id, body).to_le_bytes());
    out.extend_from_slice(body);
}

/// Decodes a header, checking its body length against `max_body_bytes`
/// before anyone sizes anything by it.
pub fn decode_header(bytes: &[u8], max_body_bytes: u32) -> Result<Header, RecordError> {
    let Some(header) = bytes.get(..HEADER_BYTES) else {
        return Err(RecordError::Truncated {
            needed_bytes: HEADER_BYTES as u64,
            available_bytes: bytes.len() as u64,
        });
    };
    let (len, rest) = header.split_at(4);
    let (id, crc) = rest.split_at(8);
    let body_bytes = u32::from_le_bytes(len.try_into().unwrap_or_default());
    if body_bytes > max_body_bytes {
        return Err(RecordError::TooLarge {
            body_bytes: u64::from(body_bytes),
            max_body_bytes: u64::from(max_body_bytes),
        });
    }
    Ok(Header {
        body_bytes,
        id: u64::from_le_bytes(id.try_into().unwrap_or_default()),
        crc: u32::from_le_bytes(crc.try_into().unwrap_or_default()),
    })
}

/// Checks a body against its header's length and checksum.
pub fn verify(header: &Header, body: &[u8]) -> Result<(), RecordError> {
    if body.len() != header.body_bytes as usize {
        return Err(RecordError::Truncated {
            needed_bytes: u64::from(header.body_bytes),
            available_bytes: body.len() as u64,
        });
    }
    let actual = checksum(header.id, body);
    if actual != header.crc {
        return Err(RecordError::Checksum {
            expected: header.crc,
            actual,
        });
    }
    Ok(())
}

/// Decodes the record at the start of `bytes` (trailing bytes are left for
/// the caller) and returns it with the number of bytes it took. The length
/// is checked against `max_body_bytes` and against `bytes` before slicing.
pub fn decode(bytes: &[u8], max_body_bytes: u32) -> Result<(Record<'_>, usize), RecordError> {
    let header = decode_header(bytes, max_body_bytes)?;
    let total = HEADER_BYTES + header.body_bytes as usize;
    let Some(body) = bytes.get(HEADER_BYTES..total) else {
        return Err(RecordError::Truncated {
            needed_bytes: total as u64,
            available_bytes: bytes.len() as u64,
        });
    };
    verify(&header, body)?;
    Ok((
        Record {
            id: header.id,
            body,
        },
        total,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_trailing_bytes() {
        let mut out = Vec::new();
        encode(&mut out, 7, b"hello");
        encode(&mut out, u64::MAX, b"");
        let (first, used) = decode(&out, 1024).unwrap();
        assert_eq!((first.id, first.body, used), (7, &b"hello"[..], 21));
        let (second, used2) = decode(&out[used..], 1024).unwrap();
        assert_eq!((second.id, second.body, used2), (u64::MAX, &b""[..], 16));
    }

    #[test]
    fn header_fields_are_little_endian() {
        let mut out = Vec::new();
        encode(&mut out, 0x0102_0304_0506_0708, b"ab");
        assert_eq!(&out[..4], &[2, 0, 0, 0]);
        assert_eq!(&out[4..12], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(
            &out[12..16],
            &checksum(0x0102_0304_0506_0708, b"ab").to_le_bytes()
        );
    }

    #[test]
    fn length_over_limit_is_refused_before_slicing() {
        let mut out = Vec::new();
        encode(&mut out, 1, &[0u8; 100]);
        assert_eq!(
            decode(&out, 99).unwrap_err(),
            RecordError::TooLarge {
                body_bytes: 100,
                max_body_bytes: 99
            }
        );
        // A header claiming 4 GiB with nothing behind it: TooLarge, not a
        // 4 GiB allocation or an out-of-bounds slice.
        let huge = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            decode(&huge, 1 << 20),
            Err(RecordError::TooLarge { .. })
        ));
    }

    #[test]
    fn truncation_anywhere_is_reported() {
        let mut out = Vec::new();
        encode(&mut out, 3, b"body bytes");
        for cut in 0..out.len() {
            assert!(
                matches!(
                    decode(&out[..cut], 1024),
                    Err(RecordError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn any_flipped_bit_in_id_or_body_fails_the_checksum() {
        let mut out = Vec::new();
        encode(&mut out, 42, b"payload");
        for byte in (4..12).chain(HEADER_BYTES..out.len()) {
            let mut bad = out.clone();
            bad[byte] ^= 0x10;
            assert!(
                matches!(decode(&bad, 1024), Err(RecordError::Checksum { .. })),
                "flip at {byte}"
            );
        }
    }
}
