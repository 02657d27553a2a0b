//! The checks the `store_record` and `store_journal` fuzz targets (and the
//! corpus replay test) run: on `record`'s decoder, the one every value
//! read from the redb file goes through, and on the append journal's scan
//! at open (`journal.rs`); pub for the fuzz targets, which live in the
//! broker's fuzz workspace and pick the payload types (log entries of
//! every group, votes, log ids). A failed check panics: that is what
//! libFuzzer reports.
//!
//! It must not know what the payloads mean, nor anything of queues.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::journal::scan_bytes;
use crate::journal_record;
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

/// The journal file `data[1..]` as the scan at open reads it. The first
/// byte picks the generation looked for (bits 1-2: 1 to 4) and whether the
/// rest is first framed as one record of it with a right CRC (bit 0), so
/// inputs reach the payload decoder. What is accepted must encode again
/// into one record that scans back to the same appends; what is refused
/// must be a record with a right CRC whose payload does not decode.
pub fn journal(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let generation = u64::from((mode >> 1) & 3) + 1;
    let file = if mode & 1 == 1 {
        journal_record::frame(generation, rest)
    } else {
        rest.to_vec()
    };
    match scan_bytes(&file, generation) {
        Ok(appends) => {
            let mut again = Vec::new();
            journal_record::encode(
                &mut again,
                generation,
                appends
                    .iter()
                    .map(|a| (a.group_id, a.records.as_slice(), a.committed.as_deref())),
            );
            let rescanned = scan_bytes(&again, generation).expect("a re-encoded journal scans");
            assert_eq!(rescanned, appends, "re-encoded appends differ");
        }
        Err(Error::JournalCorrupt { offset, .. }) => {
            let header = journal_record::header(&file[offset as usize..])
                .expect("refused where a record starts");
            let start = offset as usize + journal_record::HEADER_LEN;
            let payload = &file[start..start + header.payload_len as usize];
            assert!(header.matches(payload), "refused a record with a wrong CRC");
            assert!(journal_record::decode_payload(payload).is_err());
        }
        Err(e) => panic!("journal refused for a reason that is not in the bytes: {e}"),
    }
}

/// Journals as the store writes them, with the mode byte of [`journal`]:
/// the seeds of its fuzz target. `records` are `(group id, index, framed
/// record)`; every second one carries a committed record too.
pub fn journal_seeds(records: &[(u64, u64, Vec<u8>)]) -> Vec<Vec<u8>> {
    let committed = b"committed".to_vec();
    let mut file = Vec::new();
    for (i, (group_id, index, record)) in records.iter().enumerate() {
        let rows = [(*index, record.clone())];
        let with = (i % 2 == 1).then_some(committed.as_slice());
        journal_record::encode(&mut file, 1, [(*group_id, &rows[..], with)]);
    }
    let mut one = Vec::new();
    journal_record::encode(&mut one, 2, []);
    [(0u8, file), (2u8, one)]
        .into_iter()
        .map(|(mode, bytes)| {
            let mut seed = vec![mode];
            seed.extend_from_slice(&bytes);
            seed
        })
        .collect()
}
