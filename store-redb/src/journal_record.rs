//! One record of the append journal (`journal.rs`): the appends of one
//! write batch, framed so that a reader tells a whole record of the
//! journal's current generation from a torn one, from the zeros of a fresh
//! file and from a record an earlier generation left behind.
//!
//! Frame, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `RJNL` |
//! | 8 | generation |
//! | 4 | payload length |
//! | 4 | CRC32C over the generation, the length and the payload |
//! | n | payload |
//!
//! Payload: for each append, `group id u64 ‖ committed length u32
//! (u32::MAX: none) ‖ committed record ‖ entry count u32 ‖ entry count ×
//! (index u64 ‖ length u32 ‖ record)`. The records are the tables' framed
//! records (`record.rs`), carried as they are: their own CRC is checked
//! when they are read back from the tables.
//!
//! Knows the byte layout only: nothing of redb, of files or of Raft.

/// Length of a record's frame before its payload.
pub(crate) const HEADER_LEN: usize = 20;

const MAGIC: [u8; 4] = *b"RJNL";
/// Marks an append without a committed log id record.
const NO_COMMITTED: u32 = u32::MAX;

/// One group's append, as the journal holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JournalAppend {
    pub(crate) group_id: u64,
    pub(crate) records: Vec<(u64, Vec<u8>)>,
    pub(crate) committed: Option<Vec<u8>>,
}

/// A frame header that carries the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) generation: u64,
    pub(crate) payload_len: u32,
    crc: u32,
}

/// Why a payload with a right CRC does not decode: written by another
/// version, or a bug (a torn or stale record fails its CRC instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("journal record payload: {0}")]
pub(crate) struct PayloadError(&'static str);

fn crc(generation: u64, payload: &[u8]) -> u32 {
    let mut fixed = [0u8; 12];
    fixed[..8].copy_from_slice(&generation.to_le_bytes());
    fixed[8..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&fixed), payload)
}

/// One group's append as the writer hands it over: group id, its
/// `(index, record)` rows, and its committed log id record if any.
pub(crate) type AppendRef<'a> = (u64, &'a [(u64, Vec<u8>)], Option<&'a [u8]>);

/// Bytes of the record [`encode_into`] makes of `appends`, header
/// included.
pub(crate) fn encoded_len<'a>(appends: impl IntoIterator<Item = AppendRef<'a>>) -> usize {
    let mut len = HEADER_LEN;
    for (_, records, committed) in appends {
        len += 8 + 4 + committed.map_or(0, <[u8]>::len) + 4;
        len += records
            .iter()
            .map(|(_, record)| 8 + 4 + record.len())
            .sum::<usize>();
    }
    len
}

/// Appends one record of `appends` at `generation` to `out`. The caller
/// keeps the payload under `u32::MAX` bytes (the journal is far smaller).
pub(crate) fn encode<'a, I>(out: &mut Vec<u8>, generation: u64, appends: I)
where
    I: IntoIterator<Item = AppendRef<'a>> + Clone,
{
    let start = out.len();
    out.resize(start + encoded_len(appends.clone()), 0);
    encode_into(&mut out[start..], generation, appends);
}

/// Writes one record of `appends` at `generation` into `out`, which is
/// exactly [`encoded_len`] bytes: the direct writer hands its aligned
/// buffer here, so each record's bytes are copied once on their way to
/// the disk.
pub(crate) fn encode_into<'a>(
    out: &mut [u8],
    generation: u64,
    appends: impl IntoIterator<Item = AppendRef<'a>>,
) {
    let mut w = SliceWriter {
        out: &mut *out,
        at: HEADER_LEN,
    };
    for (group_id, records, committed) in appends {
        w.put(&group_id.to_le_bytes());
        match committed {
            Some(record) => {
                w.put(&(record.len() as u32).to_le_bytes());
                w.put(record);
            }
            None => w.put(&NO_COMMITTED.to_le_bytes()),
        }
        w.put(&(records.len() as u32).to_le_bytes());
        for (index, record) in records {
            w.put(&index.to_le_bytes());
            w.put(&(record.len() as u32).to_le_bytes());
            w.put(record);
        }
    }
    let written = w.at;
    debug_assert_eq!(written, out.len(), "encoded_len disagrees with encode_into");
    seal(out, generation);
}

/// Sequential writes into a slice sized by [`encoded_len`] (a wrong size
/// is a bug here, and panics on the slice's bounds).
struct SliceWriter<'o> {
    out: &'o mut [u8],
    at: usize,
}

impl SliceWriter<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

/// Fills in the header at the start of `out` for the payload after it.
fn seal(out: &mut [u8], generation: u64) {
    let payload_len = (out.len() - HEADER_LEN) as u32;
    let crc = crc(generation, &out[HEADER_LEN..]);
    let header = &mut out[..HEADER_LEN];
    header[..4].copy_from_slice(&MAGIC);
    header[4..12].copy_from_slice(&generation.to_le_bytes());
    header[12..16].copy_from_slice(&payload_len.to_le_bytes());
    header[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// `payload`, whatever it holds, framed as a record of `generation` with
/// a right CRC: for the fuzz target, so inputs reach the payload decoder.
pub(crate) fn frame(generation: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    out.extend_from_slice(payload);
    seal(&mut out, generation);
    out
}

/// The header at the start of `bytes`, if they hold one with the magic.
pub(crate) fn header(bytes: &[u8]) -> Option<Header> {
    let bytes = bytes.get(..HEADER_LEN)?;
    if bytes[..4] != MAGIC {
        return None;
    }
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut generation = [0u8; 8];
    generation.copy_from_slice(&bytes[4..12]);
    Some(Header {
        generation: u64::from_le_bytes(generation),
        payload_len: u32_at(12),
        crc: u32_at(16),
    })
}

impl Header {
    /// Whether `payload` is the payload this header was written with.
    pub(crate) fn matches(&self, payload: &[u8]) -> bool {
        payload.len() == self.payload_len as usize && crc(self.generation, payload) == self.crc
    }
}

/// Reads the payload of a record as appends.
pub(crate) fn decode_payload(mut payload: &[u8]) -> Result<Vec<JournalAppend>, PayloadError> {
    let mut out = Vec::new();
    while !payload.is_empty() {
        let group_id = take_u64(&mut payload)?;
        let committed = match take_u32(&mut payload)? {
            NO_COMMITTED => None,
            len => Some(take_bytes(&mut payload, len)?.to_vec()),
        };
        let n = take_u32(&mut payload)?;
        // Each entry takes at least 12 bytes: a count that cannot fit is
        // refused before anything is reserved for it.
        if (n as usize).saturating_mul(12) > payload.len() {
            return Err(PayloadError("entry count past the end"));
        }
        let mut records = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let index = take_u64(&mut payload)?;
            let len = take_u32(&mut payload)?;
            records.push((index, take_bytes(&mut payload, len)?.to_vec()));
        }
        out.push(JournalAppend {
            group_id,
            records,
            committed,
        });
    }
    Ok(out)
}

fn take_bytes<'a>(payload: &mut &'a [u8], len: u32) -> Result<&'a [u8], PayloadError> {
    let len = len as usize;
    if payload.len() < len {
        return Err(PayloadError("field past the end"));
    }
    let (head, rest) = payload.split_at(len);
    *payload = rest;
    Ok(head)
}

fn take_u32(payload: &mut &[u8]) -> Result<u32, PayloadError> {
    let b = take_bytes(payload, 4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn take_u64(payload: &mut &[u8]) -> Result<u64, PayloadError> {
    let mut b = [0u8; 8];
    b.copy_from_slice(take_bytes(payload, 8)?);
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<JournalAppend> {
        vec![
            JournalAppend {
                group_id: 7,
                records: vec![(1, b"one".to_vec()), (2, Vec::new())],
                committed: Some(b"c".to_vec()),
            },
            JournalAppend {
                group_id: u64::MAX,
                records: Vec::new(),
                committed: None,
            },
        ]
    }

    fn encoded(generation: u64, appends: &[JournalAppend]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            &mut out,
            generation,
            appends
                .iter()
                .map(|a| (a.group_id, a.records.as_slice(), a.committed.as_deref())),
        );
        out
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let bytes = encoded(42, &sample());
        let h = header(&bytes).unwrap();
        assert_eq!(h.generation, 42);
        let payload = &bytes[HEADER_LEN..];
        assert!(h.matches(payload));
        assert_eq!(decode_payload(payload).unwrap(), sample());
    }

    /// The length [`encode_into`] is sized by is the length it fills, and
    /// a record appended after bytes already in the buffer is the same.
    #[test]
    fn encoded_len_is_what_encode_writes() {
        for appends in [sample(), Vec::new(), sample()[..1].to_vec()] {
            let refs = || {
                appends
                    .iter()
                    .map(|a| (a.group_id, a.records.as_slice(), a.committed.as_deref()))
            };
            let alone = encoded(5, &appends);
            assert_eq!(encoded_len(refs()), alone.len());
            let mut after = b"earlier".to_vec();
            encode(&mut after, 5, refs());
            assert_eq!(&after[..7], b"earlier");
            assert_eq!(after[7..], alone[..]);
        }
    }

    #[test]
    fn torn_stale_and_zeroed_records_are_told_apart() {
        let bytes = encoded(3, &sample());
        let h = header(&bytes).unwrap();
        // Torn: the payload is cut short.
        assert!(!h.matches(&bytes[HEADER_LEN..bytes.len() - 1]));
        // A flipped byte anywhere in the payload.
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(!h.matches(&flipped[HEADER_LEN..]));
        // The generation is covered by the CRC: a header rewritten to
        // another generation does not match its payload.
        let mut other = bytes.clone();
        other[4] ^= 1;
        assert!(!header(&other).unwrap().matches(&other[HEADER_LEN..]));
        // A fresh file's zeros carry no magic.
        assert_eq!(header(&[0u8; HEADER_LEN]), None);
        assert_eq!(header(&bytes[..HEADER_LEN - 1]), None);
    }

    #[test]
    fn a_cut_payload_gives_at_most_the_appends_before_the_cut() {
        let bytes = encoded(1, &sample());
        let payload = &bytes[HEADER_LEN..];
        let whole = sample();
        for cut in 1..payload.len() {
            // Refused, or (cut between two appends) the appends before it.
            if let Ok(prefix) = decode_payload(&payload[..cut]) {
                assert!(prefix.len() < whole.len(), "cut at {cut} gave everything");
                assert_eq!(prefix[..], whole[..prefix.len()], "cut at {cut}");
            }
        }
    }
}
