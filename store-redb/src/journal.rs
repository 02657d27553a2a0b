//! The append journal: a preallocated file beside the redb file where the
//! writer makes a batch of appends durable with one contiguous write and
//! one `fdatasync`, instead of a redb transaction per batch; the appends
//! are folded into the tables later, many batches in one transaction.
//!
//! Why: a redb commit of a few small entries writes about 21 KB in five
//! places (copy-on-write pages and redb's own metadata) and costs about
//! 200k instructions; three nodes committing at once on one disk measured
//! p50 573 µs against 247 µs for a plain write and `fdatasync` behind the
//! same thread hand-offs (docs/benchmarks.md, "What one redb commit costs").
//!
//! Generations and regions: the file is two regions of half its size. A
//! generation is written from the start of one region; `folded` (in the
//! tables, `layout.rs`) is the last generation whose appends are in the
//! tables. A fold writes a generation's appends and `folded = generation`
//! in one durable transaction. When a region is full the writer hands its
//! generation to the fold thread (`fold.rs`) and goes on in the other
//! region with the next generation, over records already folded; it waits
//! for that fold before it fills the other region too, and before any
//! other redb commit. At open, generation `folded + 1` is read from the
//! start of whichever region begins with it, then `folded + 2` from the
//! other; a region's scan stops at the first record that does not carry
//! the generation, the magic and a right CRC (a torn write, a record an
//! older generation left, or the zeros of a fresh file). Records are
//! written in order, each batch's before its sync, and a generation is
//! begun only once the one before it filled its region, so nothing
//! acknowledged lies past those stops.
//!
//! The file is zero-filled to its capacity when created and never grows:
//! a write into blocks the file already has makes `fdatasync` flush data
//! only, not the file's size or block map. Where the store asks for it and
//! the file system allows, records are written instead through the file
//! opened again with `O_DIRECT | O_DSYNC` (`direct_write.rs`), each write
//! durable by itself, with no `fdatasync`.
//!
//! Owns the file, the regions, the generation and the write offset.
//! Knows nothing of redb's tables (the writer and the fold thread fold)
//! nor of Raft.

use std::io;

use redb::StorageBackend;

use crate::direct_write::{DirectWriter, BLOCK};
use crate::error::Error;
use crate::journal_record::{self, AppendRef, JournalAppend, HEADER_LEN};

/// The zero-fill of a new journal is written in pieces of this size.
const FILL_STEP: usize = 1 << 20;

/// The journal of one store: a file of two regions, written one at a time.
pub(crate) struct Journal {
    file: Box<dyn StorageBackend>,
    /// Bytes of each region; region `r` starts at `r * region_len`.
    region_len: u64,
    /// The region being written (0 or 1).
    region: u64,
    /// The generation of the records being written.
    generation: u64,
    /// Where the next record goes, from the region's start.
    offset: u64,
    /// The encoding buffer of writes through the page cache, kept
    /// between batches (a direct write encodes into its own buffer).
    buf: Vec<u8>,
    /// The file opened again for direct, synchronous writes, if the store
    /// asked for it and the file system does them (`direct_write.rs`);
    /// otherwise each record is written through `file` and synced.
    direct: Option<DirectWriter>,
}

/// A journal just opened, with the appends it holds that the tables do
/// not (to fold before anything else is written).
pub(crate) struct Opened {
    pub(crate) journal: Journal,
    /// The last generation whose appends were read: fold them with it as
    /// `folded` (`None`: nothing to fold).
    pub(crate) generation: Option<u64>,
    /// The appends read, oldest generation first, each in write order.
    pub(crate) replay: Vec<JournalAppend>,
}

impl Journal {
    /// Opens the journal on `file` and reads the appends of the
    /// generations after `folded`: generation `folded + 1` from the start
    /// of whichever region begins with it, then `folded + 2` from the
    /// other's. The regions are the halves of the file as it is (it was
    /// written with them, whatever the capacity asked for now); fold what
    /// was read, then [`Journal::prepare`] it before writing.
    pub(crate) fn open(file: Box<dyn StorageBackend>, folded: u64) -> Result<Opened, Error> {
        let len = file.len().map_err(Error::Journal)?;
        let region_len = len / 2;
        let mut replay = Vec::new();
        let mut generation = None;
        for wanted in [folded + 1, folded + 2] {
            let mut found = false;
            for region in [0, 1] {
                let from = region * region_len;
                // A new file is shorter than its regions until filled.
                let readable = len.saturating_sub(from).min(region_len);
                if first_generation(file.as_ref(), from, readable)? == Some(wanted) {
                    replay.extend(scan(file.as_ref(), from, readable, wanted)?);
                    generation = Some(wanted);
                    found = true;
                    break;
                }
            }
            if !found {
                break;
            }
        }
        Ok(Opened {
            journal: Journal {
                file,
                region_len,
                region: 0,
                generation: generation.unwrap_or(folded) + 1,
                offset: 0,
                buf: Vec::new(),
                direct: None,
            },
            generation,
            replay,
        })
    }

    /// Makes the file `capacity` bytes of zeros, in two regions of half
    /// that, unless it already has that size (a new file, or one written
    /// with another capacity: its appends are folded by now, so nothing
    /// in it is needed).
    pub(crate) fn prepare(mut self, capacity: u64) -> Result<Journal, Error> {
        let io = |e: io::Error| Error::Journal(e);
        if self.file.len().map_err(io)? != capacity {
            self.file.set_len(0).map_err(io)?;
            // Sized first (a backend need not grow on a write), then
            // written, so that the blocks exist before the first append.
            self.file.set_len(capacity).map_err(io)?;
            let zeros = vec![0u8; FILL_STEP];
            let mut at = 0;
            while at < capacity {
                let n = (capacity - at).min(FILL_STEP as u64) as usize;
                self.file.write(at, &zeros[..n]).map_err(io)?;
                at += n as u64;
            }
            self.file.sync_data().map_err(io)?;
        }
        self.region_len = capacity / 2;
        self.region = 0;
        self.offset = 0;
        Ok(self)
    }

    /// Makes later records durable through `direct` instead of a write and
    /// an `fdatasync` of the file (after [`Journal::prepare`], which writes
    /// through the page cache). Refused, returning false, when a region
    /// does not start on a block, where the direct writer could not begin.
    pub(crate) fn write_directly(&mut self, direct: DirectWriter) -> bool {
        if !self.region_len.is_multiple_of(BLOCK) {
            return false;
        }
        self.direct = Some(direct);
        true
    }

    /// Whether records are written directly (the last one was, unless a
    /// failure turned it off).
    pub(crate) fn writes_directly(&self) -> bool {
        self.direct.is_some()
    }

    /// The generation being written: the one a fold of the appends written
    /// since [`Journal::next_generation`] records as folded.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether anything was written in this generation.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Writes one record of `appends` and syncs it. Returns false, having
    /// written nothing, when the record does not fit in what is left of
    /// the region: the caller then starts the next generation (once the
    /// other region is folded) or folds instead.
    pub(crate) fn write<'a, I>(&mut self, appends: I) -> Result<bool, Error>
    where
        I: IntoIterator<Item = AppendRef<'a>> + Clone,
    {
        let len = journal_record::encoded_len(appends.clone());
        if self.offset + len as u64 > self.region_len
            || (len - HEADER_LEN) as u64 > u64::from(u32::MAX)
        {
            return Ok(false);
        }
        let at = self.region * self.region_len + self.offset;
        let generation = self.generation;
        // Encoded straight into the direct writer's aligned buffer.
        let direct = match self.direct.as_mut().map(|d| {
            d.write_with(at, len, |out| {
                journal_record::encode_into(out, generation, appends.clone())
            })
        }) {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                // Whatever the direct write left, the record is written
                // and synced whole below: the same bytes, made durable.
                tracing::warn!(error = %e, "store-redb: a direct journal write failed; writing through the page cache from now on");
                self.direct = None;
                false
            }
            None => false,
        };
        if !direct {
            self.buf.clear();
            journal_record::encode(&mut self.buf, generation, appends);
            self.file.write(at, &self.buf).map_err(Error::Journal)?;
            self.file.sync_data().map_err(Error::Journal)?;
            // A batch of a few thousand entries should not pin its buffer.
            if self.buf.capacity() > FILL_STEP {
                self.buf = Vec::new();
            }
        }
        self.offset += len as u64;
        Ok(true)
    }

    /// Starts the next generation at the start of the other region. The
    /// caller guarantees that the other region's generation is folded (or
    /// is being folded and will be before anything else is committed):
    /// its records are overwritten from now on.
    pub(crate) fn next_generation(&mut self) {
        self.generation += 1;
        self.region ^= 1;
        self.offset = 0;
    }
}

/// The generation of the first record of the region at `from`, if it
/// holds one with the magic.
fn first_generation(file: &dyn StorageBackend, from: u64, len: u64) -> Result<Option<u64>, Error> {
    if len < HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut header = [0u8; HEADER_LEN];
    file.read(from, &mut header).map_err(Error::Journal)?;
    Ok(journal_record::header(&header).map(|h| h.generation))
}

/// The appends of `generation` from the start of the region of `len`
/// bytes at `from`.
fn scan(
    file: &dyn StorageBackend,
    from: u64,
    len: u64,
    generation: u64,
) -> Result<Vec<JournalAppend>, Error> {
    let mut out = Vec::new();
    let mut at = 0u64;
    let mut header = [0u8; HEADER_LEN];
    while at + HEADER_LEN as u64 <= len {
        file.read(from + at, &mut header).map_err(Error::Journal)?;
        let Some(h) = journal_record::header(&header) else {
            break;
        };
        let end = at + HEADER_LEN as u64 + u64::from(h.payload_len);
        if h.generation != generation || end > len {
            break;
        }
        let mut payload = vec![0u8; h.payload_len as usize];
        file.read(from + at + HEADER_LEN as u64, &mut payload)
            .map_err(Error::Journal)?;
        if !h.matches(&payload) {
            break;
        }
        // A right CRC over a payload that does not decode is not a torn
        // write: refuse to open rather than drop acknowledged appends.
        let appends =
            journal_record::decode_payload(&payload).map_err(|e| Error::JournalCorrupt {
                offset: from + at,
                reason: e.to_string(),
            })?;
        out.extend(appends);
        at = end;
    }
    Ok(out)
}

/// The appends a journal of `bytes` holds for `generation`, for the fuzz
/// target: the scan of [`Journal::open`] on an in-memory file.
pub(crate) fn scan_bytes(bytes: &[u8], generation: u64) -> Result<Vec<JournalAppend>, Error> {
    let file = redb::backends::InMemoryBackend::new();
    file.set_len(bytes.len() as u64).map_err(Error::Journal)?;
    file.write(0, bytes).map_err(Error::Journal)?;
    scan(&file, 0, bytes.len() as u64, generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lossy_file::{CrashSwitch, LossyFile};

    fn append(group_id: u64, index: u64) -> JournalAppend {
        JournalAppend {
            group_id,
            records: vec![(index, vec![index as u8; 40])],
            committed: None,
        }
    }

    fn write(j: &mut Journal, appends: &[JournalAppend]) -> bool {
        j.write(
            appends
                .iter()
                .map(|a| (a.group_id, a.records.as_slice(), a.committed.as_deref())),
        )
        .unwrap()
    }

    fn indexes(replay: &[JournalAppend]) -> Vec<u64> {
        replay
            .iter()
            .flat_map(|a| a.records.iter().map(|r| r.0))
            .collect()
    }

    /// Opens and prepares a journal of 4 KiB (regions of 2 KiB), as if
    /// what it held was folded; `opened.replay` is what it held.
    fn open(path: &std::path::Path, folded: u64) -> (Opened, std::sync::Arc<CrashSwitch>) {
        open_with(path, folded, 4096)
    }

    fn open_with(
        path: &std::path::Path,
        folded: u64,
        capacity: u64,
    ) -> (Opened, std::sync::Arc<CrashSwitch>) {
        let switch = CrashSwitch::new();
        let file = LossyFile::open(path, switch.clone()).unwrap();
        let mut opened = Journal::open(Box::new(file), folded).unwrap();
        opened.journal = opened.journal.prepare(capacity).unwrap();
        (opened, switch)
    }

    #[test]
    fn synced_records_replay_and_a_power_cut_loses_only_the_unsynced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let (mut opened, switch) = open(&path, 0);
        assert!(opened.replay.is_empty());
        assert!(write(&mut opened.journal, &[append(1, 1), append(2, 1)]));
        assert!(write(&mut opened.journal, &[append(1, 2)]));
        // The power goes as the third record is written.
        switch.crash_at_write(0);
        assert!(opened
            .journal
            .write([(1, &[(3u64, vec![3u8])][..], None)])
            .is_err());
        drop(opened);
        let (again, _) = open(&path, 0);
        assert_eq!(again.generation, Some(1));
        assert_eq!(again.journal.generation(), 2);
        assert_eq!(indexes(&again.replay), vec![1, 1, 2]);
    }

    #[test]
    fn generations_alternate_regions_and_replay_from_the_first_unfolded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let (mut opened, _) = open(&path, 0);
        for i in 1..=4 {
            assert!(write(&mut opened.journal, &[append(1, i)]));
        }
        // Generation 2, in the other region.
        opened.journal.next_generation();
        assert!(write(&mut opened.journal, &[append(1, 5)]));
        drop(opened);
        // Nothing folded: both generations, in order.
        let (again, _) = open(&path, 0);
        assert_eq!(again.generation, Some(2));
        assert_eq!(indexes(&again.replay), vec![1, 2, 3, 4, 5]);
        drop(again);
        // Generation 1 folded: only generation 2.
        let (again, _) = open(&path, 1);
        assert_eq!(indexes(&again.replay), vec![5]);
        drop(again);
        // Both folded: nothing, and the next generation is 3.
        let (mut again, _) = open(&path, 2);
        assert_eq!(again.generation, None);
        assert!(again.replay.is_empty());
        assert_eq!(again.journal.generation(), 3);
        // Generation 3 overwrites the start of the first region with one
        // shorter run: generation 1's records after it are not read.
        assert!(write(&mut again.journal, &[append(1, 6)]));
        drop(again);
        let (again, _) = open(&path, 2);
        assert_eq!(indexes(&again.replay), vec![6]);
    }

    #[test]
    fn a_journal_reopened_with_another_capacity_replays_with_its_own_regions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let (mut opened, _) = open_with(&path, 0, 4096);
        assert!(write(&mut opened.journal, &[append(1, 1)]));
        opened.journal.next_generation();
        assert!(write(&mut opened.journal, &[append(1, 2)]));
        drop(opened);
        // Asked for 8 KiB now: both generations still replay (from the
        // 2 KiB regions they were written in), then the file is remade.
        let (again, _) = open_with(&path, 0, 8192);
        assert_eq!(indexes(&again.replay), vec![1, 2]);
        drop(again);
        let (again, _) = open_with(&path, 2, 8192);
        assert!(again.replay.is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    }

    #[test]
    fn a_record_that_does_not_fit_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let (mut opened, _) = open(&dir.path().join("j"), 0);
        // Regions of 2,048 bytes: one of these fits, two do not.
        let big = JournalAppend {
            group_id: 1,
            records: vec![(1, vec![0u8; 1500])],
            committed: None,
        };
        assert!(write(&mut opened.journal, std::slice::from_ref(&big)));
        assert!(!write(&mut opened.journal, std::slice::from_ref(&big)));
        assert!(!opened.journal.is_empty());
        opened.journal.next_generation();
        assert!(opened.journal.is_empty());
        assert!(write(&mut opened.journal, std::slice::from_ref(&big)));
        // Larger than a region: never fits.
        let huge = JournalAppend {
            records: vec![(2, vec![0u8; 2100])],
            ..big
        };
        opened.journal.next_generation();
        assert!(!write(&mut opened.journal, &[huge]));
    }

    #[test]
    fn a_right_crc_over_an_undecodable_payload_refuses_the_open() {
        let mut bytes = Vec::new();
        journal_record::encode(&mut bytes, 1, [(9u64, &[(1u64, vec![1u8])][..], None)]);
        // Same record with one payload byte less, CRC recomputed: the
        // frame is sound, the payload is not.
        let payload = bytes[HEADER_LEN..bytes.len() - 1].to_vec();
        let mut forged = Vec::new();
        forged.extend_from_slice(b"RJNL");
        forged.extend_from_slice(&1u64.to_le_bytes());
        forged.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut fixed = 1u64.to_le_bytes().to_vec();
        fixed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&fixed), &payload);
        forged.extend_from_slice(&crc.to_le_bytes());
        forged.extend_from_slice(&payload);
        assert!(matches!(
            scan_bytes(&forged, 1),
            Err(Error::JournalCorrupt { offset: 0, .. })
        ));
        assert_eq!(indexes(&scan_bytes(&bytes, 1).unwrap()), vec![1]);
        assert!(scan_bytes(&bytes, 2).unwrap().is_empty());
        // A torn second record: the scan keeps the first and stops.
        let first = bytes.len();
        journal_record::encode(&mut bytes, 1, [(9u64, &[(2u64, vec![2u8; 30])][..], None)]);
        assert_eq!(indexes(&scan_bytes(&bytes, 1).unwrap()), vec![1, 2]);
        for cut in first + 1..bytes.len() {
            assert_eq!(indexes(&scan_bytes(&bytes[..cut], 1).unwrap()), vec![1]);
        }
    }
}
