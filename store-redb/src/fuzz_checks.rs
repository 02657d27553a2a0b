//! The check the `store_record` fuzz target (and the corpus replay test)
//! runs on `record`'s decoder, the one every value read from the
//! redb file goes through; pub for the fuzz targets, which live in the
//! broker's fuzz workspace and pick the payload types (log entries of
//! every group, votes, log ids). A failed check panics: that is what
//! libFuzzer reports.
//!
//! It must not know what the payloads mean, nor anything of queues.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::record::{self, HEADER_LEN};
use crate::tables::RecordKey;

/// `payload` framed as a record stored under `key` (a right CRC), so that
/// fuzz inputs reach the payload decoder.
pub fn frame(key: RecordKey, payload: &[u8]) -> Vec<u8> {
    let crc = crc32c::crc32c(&key.checksum_bytes());
    let crc = crc32c::crc32c_append(crc, payload);
    let mut out = crc.to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// Decode `bytes` as a `T` stored under `key`. What is accepted must have a
/// right CRC, and framing it again gives a record no longer than the input
/// that decodes and re-frames identically. What is refused is refused for
/// what the bytes hold: too short, a wrong CRC (and only then), or a
/// payload that does not decode.
pub fn record<T: Serialize + DeserializeOwned>(key: RecordKey, bytes: &[u8]) {
    let crc_holds = bytes.len() >= HEADER_LEN && frame(key, &bytes[HEADER_LEN..]) == bytes;
    match record::decode::<T>(key, bytes) {
        Ok(value) => {
            assert!(crc_holds, "{key}: accepted with a wrong CRC");
            let first = record::encode(key, &value).expect("a decoded record encodes");
            assert!(first.len() <= bytes.len(), "{key}: re-encoding is longer");
            let again: T = record::decode(key, &first).expect("a re-encoded record decodes");
            let second = record::encode(key, &again).expect("a re-decoded record encodes");
            assert_eq!(first, second, "{key}: decode of the re-encoding differs");
        }
        Err(Error::RecordTruncated { n_bytes, .. }) => {
            assert!(n_bytes == bytes.len() && n_bytes < HEADER_LEN);
        }
        Err(Error::ChecksumMismatch {
            stored, computed, ..
        }) => {
            assert!(
                !crc_holds && stored != computed,
                "{key}: a right CRC refused"
            );
        }
        Err(Error::Decode { .. }) => assert!(crc_holds, "{key}: decoded a wrong CRC"),
        Err(e) => panic!("{key}: refused for a reason that is not in the bytes: {e}"),
    }
}
