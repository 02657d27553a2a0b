//! Record framing: every value this crate stores is
//! `crc32c (u32, little-endian) ‖ postcard payload`, where the CRC32C covers
//! the record's key ([`RecordKey::checksum_bytes`]) followed by the payload.
//!
//! Covering the key means a record found under the wrong key (a misdirected
//! write, a bug in range deletion) fails the check just as flipped bits do.
//! The checksum is verified on every read, before the payload is decoded;
//! a record that fails is reported as an [`Error`], never served.
//! [`encode`] checks its own output before it returns (a debug assertion),
//! so both sides of the disk are checked.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::tables::RecordKey;

/// Bytes of the frame header (the CRC32C).
pub(crate) const HEADER_LEN: usize = 4;

fn checksum(key: &RecordKey, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&key.checksum_bytes());
    crc32c::crc32c_append(crc, payload)
}

/// Serializes `value` and frames it for storage under `key`.
pub(crate) fn encode<T: Serialize + ?Sized>(key: RecordKey, value: &T) -> Result<Vec<u8>, Error> {
    let buf = vec![0u8; HEADER_LEN];
    let mut buf =
        postcard::to_extend(value, buf).map_err(|source| Error::Encode { key, source })?;
    let crc = checksum(&key, &buf[HEADER_LEN..]);
    buf[..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    debug_assert!(
        verify(key, &buf).is_ok(),
        "a freshly framed record must verify"
    );
    Ok(buf)
}

/// Checks the frame of a record stored under `key` and returns its payload.
pub(crate) fn verify(key: RecordKey, record: &[u8]) -> Result<&[u8], Error> {
    let Some((header, payload)) = record.split_first_chunk::<HEADER_LEN>() else {
        return Err(Error::RecordTruncated {
            key,
            n_bytes: record.len(),
        });
    };
    let stored = u32::from_le_bytes(*header);
    let computed = checksum(&key, payload);
    if stored != computed {
        return Err(Error::ChecksumMismatch {
            key,
            stored,
            computed,
        });
    }
    Ok(payload)
}

/// Verifies and decodes a record stored under `key`.
pub(crate) fn decode<T: DeserializeOwned>(key: RecordKey, record: &[u8]) -> Result<T, Error> {
    let payload = verify(key, record)?;
    let (value, rest) = postcard::take_from_bytes::<T>(payload).map_err(|e| Error::Decode {
        key,
        reason: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(Error::Decode {
            key,
            reason: format!("{} trailing bytes", rest.len()),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: RecordKey = RecordKey::Entry {
        group_id: 7,
        index: 42,
    };

    #[test]
    fn round_trip() {
        let rec = encode(KEY, &(1u64, "hello".to_string())).unwrap();
        let back: (u64, String) = decode(KEY, &rec).unwrap();
        assert_eq!(back, (1, "hello".to_string()));
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let rec = encode(KEY, &vec![0xabu8; 40]).unwrap();
        for i in 0..rec.len() * 8 {
            let mut bad = rec.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(
                matches!(
                    decode::<Vec<u8>>(KEY, &bad),
                    Err(Error::ChecksumMismatch { .. })
                ),
                "bit {i}"
            );
        }
    }

    #[test]
    fn a_record_under_another_key_is_detected() {
        let rec = encode(KEY, &5u32).unwrap();
        let other = RecordKey::Entry {
            group_id: 7,
            index: 43,
        };
        assert!(matches!(
            decode::<u32>(other, &rec),
            Err(Error::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn short_and_trailing_records_are_errors() {
        assert!(matches!(
            decode::<u32>(KEY, &[1, 2]),
            Err(Error::RecordTruncated { n_bytes: 2, .. })
        ));
        let rec = encode(KEY, &(5u8, 6u8)).unwrap();
        assert!(matches!(decode::<u8>(KEY, &rec), Err(Error::Decode { .. })));
    }
}
