//! `Segment`: one append-only segment file `<dir>/<seq:020>.seg` and its
//! cached open handle. Appends collect in a buffer and reach the file in one
//! positioned write; reads are positioned reads whose record is checked
//! (length against the file and the limit before allocating, id, checksum)
//! before any byte is returned. A `Cursor` walks the records in order and
//! stops at the first torn or corrupt one.
//!
//! Knows one file; which records are live, when to roll and when to sync
//! belong to the store.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::error::StoreError;
use super::location::Location;
use super::record::{self, Header, HEADER_BYTES};

const SEGMENT_SUFFIX: &str = ".seg";
const TEMP_SUFFIX: &str = ".seg.tmp";
const SEQ_DIGITS: usize = 20;

/// What a file in a store directory is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileKind {
    /// `<seq:020>.seg`
    Segment(u32),
    /// `<seq:020>.seg.tmp`: an unfinished compaction output.
    Temp(u32),
}

/// Parses a store file name; `None` for anything else.
pub(super) fn parse_name(name: &str) -> Option<FileKind> {
    let (digits, temp) = if let Some(d) = name.strip_suffix(TEMP_SUFFIX) {
        (d, true)
    } else {
        (name.strip_suffix(SEGMENT_SUFFIX)?, false)
    };
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seq = u32::try_from(digits.parse::<u64>().ok()?).ok()?;
    Some(if temp {
        FileKind::Temp(seq)
    } else {
        FileKind::Segment(seq)
    })
}

/// The path of segment `seq`.
pub(super) fn segment_path(dir: &Path, seq: u32) -> PathBuf {
    dir.join(format!("{seq:020}{SEGMENT_SUFFIX}"))
}

/// The temporary path compaction writes segment `seq` under.
pub(super) fn temp_path(dir: &Path, seq: u32) -> PathBuf {
    dir.join(format!("{seq:020}{TEMP_SUFFIX}"))
}

/// One segment file.
#[derive(Debug)]
pub(super) struct Segment {
    seq: u32,
    path: PathBuf,
    file: File,
    /// Bytes in the file: written by us, or its size when opened.
    file_bytes: u64,
    /// Appended records not written yet; always whole records.
    buffer: Vec<u8>,
    /// Records appended by this process; the next ordinal. Only meaningful
    /// for a segment created by this process (opened ones are sealed).
    n_records: u32,
    sealed: bool,
    /// Bytes before this offset have had their writeback started.
    writeback_from: u64,
    /// Start writeback once this many bytes more were written; 0: never.
    writeback_step: u64,
}

// Early writeback (`StoreOptions::writeback_step_bytes`). Why: nothing
// else sends segment pages to disk before the next snapshot's fdatasync,
// which on a deep queue then flushed a few hundred MB at once; on a disk
// shared with the Raft log (and, on one machine, with the other nodes'
// logs) that burst held log fsyncs back for 50-100 ms. Started in small
// steps, the same bytes go out while the log keeps committing, and the
// snapshot's fdatasync finds little left to do. Durability is unchanged:
// only `sync` promises anything.

impl Segment {
    /// Creates a new, empty segment file at `path` (fails if it exists).
    /// `writeback_step`: see `StoreOptions::writeback_step_bytes`.
    pub(super) fn create(seq: u32, path: PathBuf, writeback_step: u32) -> Result<Self, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::io("create segment", &path, e))?;
        Ok(Self {
            seq,
            path,
            file,
            file_bytes: 0,
            buffer: Vec::new(),
            n_records: 0,
            sealed: false,
            writeback_from: 0,
            writeback_step: u64::from(writeback_step),
        })
    }

    /// Opens an existing segment, sealed: nothing is ever appended after a
    /// tail that may be torn.
    pub(super) fn open_sealed(seq: u32, path: PathBuf) -> Result<Self, StoreError> {
        let file = File::open(&path).map_err(|e| StoreError::io("open segment", &path, e))?;
        let file_bytes = file
            .metadata()
            .map_err(|e| StoreError::io("stat segment", &path, e))?
            .len();
        Ok(Self {
            seq,
            path,
            file,
            file_bytes,
            buffer: Vec::new(),
            n_records: 0,
            sealed: true,
            writeback_from: file_bytes,
            writeback_step: 0,
        })
    }

    pub(super) fn seq(&self) -> u32 {
        self.seq
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Size in bytes, buffered appends included.
    pub(super) fn bytes(&self) -> u64 {
        self.file_bytes + self.buffer.len() as u64
    }

    pub(super) fn is_sealed(&self) -> bool {
        self.sealed
    }

    pub(super) fn seal(&mut self) {
        self.sealed = true;
    }

    /// Bytes of appended records waiting in the buffer.
    pub(super) fn buffered_bytes(&self) -> u64 {
        self.buffer.len() as u64
    }

    /// Appends a record to the buffer (no syscall) and returns its location.
    /// The caller has checked the body against its limit and the roll size,
    /// so the offset fits a u32.
    pub(super) fn append(&mut self, id: u64, body: &[u8]) -> Result<Location, StoreError> {
        debug_assert!(!self.sealed, "append to sealed segment {}", self.seq);
        let offset = u32::try_from(self.bytes()).map_err(|_| StoreError::Exhausted {
            what: "segment offsets",
        })?;
        let ordinal = self.n_records;
        let next = ordinal.checked_add(1).ok_or(StoreError::Exhausted {
            what: "record ordinals",
        })?;
        let body_bytes = u32::try_from(body.len()).map_err(|_| StoreError::BodyTooLarge {
            body_bytes: body.len() as u64,
            max_record_bytes: u32::MAX,
        })?;
        record::encode(&mut self.buffer, id, body);
        self.n_records = next;
        Ok(Location {
            segment: self.seq,
            offset,
            body_bytes,
            ordinal,
        })
    }

    /// Writes the buffered records in one positioned write.
    pub(super) fn flush(&mut self) -> Result<(), StoreError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.file
            .write_all_at(&self.buffer, self.file_bytes)
            .map_err(|e| StoreError::io("write segment", &self.path, e))?;
        self.file_bytes += self.buffer.len() as u64;
        self.buffer.clear();
        if self.writeback_step > 0 && self.file_bytes - self.writeback_from >= self.writeback_step {
            self.start_writeback();
        }
        Ok(())
    }

    /// Asks the kernel to start writing back the bytes written since the
    /// last call. `POSIX_FADV_DONTNEED` on dirty pages starts their
    /// writeback and returns (Linux's `generic_fadvise`); pages still dirty
    /// or under writeback are not dropped, so nothing just written leaves
    /// the cache because of it. A hint: an error changes nothing a caller
    /// relies on (`sync` still writes and waits), so it is not reported.
    fn start_writeback(&mut self) {
        let len = self.file_bytes - self.writeback_from;
        let _ = rustix::fs::fadvise(
            &self.file,
            self.writeback_from,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::DontNeed,
        );
        self.writeback_from = self.file_bytes;
    }

    /// Writes the buffer, then fdatasyncs the file.
    pub(super) fn sync(&mut self) -> Result<(), StoreError> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io("fdatasync segment", &self.path, e))
    }

    /// Writes the buffer and returns a second handle on the file and its
    /// size then, for reads or an fdatasync outside the store's owner.
    pub(super) fn detach(&mut self) -> Result<(File, u64), StoreError> {
        self.flush()?;
        let file = self
            .file
            .try_clone()
            .map_err(|e| StoreError::io("duplicate segment handle", &self.path, e))?;
        Ok((file, self.file_bytes))
    }

    /// Follows a rename of the file (compaction's temp name to its own).
    pub(super) fn renamed(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Reads `len` bytes at `offset`, from the buffer or the file; the
    /// caller has checked `offset + len <= self.bytes()`.
    fn read_at(&self, offset: u64, out: &mut [u8]) -> Result<(), StoreError> {
        if offset >= self.file_bytes {
            // Records are buffered whole, so a record starting in the
            // buffer lies entirely in it.
            let start = (offset - self.file_bytes) as usize;
            let Some(src) = self.buffer.get(start..start + out.len()) else {
                return Err(StoreError::io(
                    "read buffered segment",
                    &self.path,
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            };
            out.copy_from_slice(src);
            return Ok(());
        }
        self.file
            .read_exact_at(out, offset)
            .map_err(|e| StoreError::io("read segment", &self.path, e))
    }

    /// Reads `len` bytes at `offset`, which may span the written file and
    /// the buffer; the caller has checked `offset + len <= self.bytes()`.
    pub(super) fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        let mut out = vec![0u8; len];
        let in_file = self.file_bytes.saturating_sub(offset).min(len as u64) as usize;
        if in_file > 0 {
            self.file
                .read_exact_at(&mut out[..in_file], offset)
                .map_err(|e| StoreError::io("read segment", &self.path, e))?;
        }
        if in_file < len {
            let start = (offset + in_file as u64 - self.file_bytes) as usize;
            let Some(src) = self.buffer.get(start..start + (len - in_file)) else {
                return Err(StoreError::io(
                    "read buffered segment",
                    &self.path,
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            };
            out[in_file..].copy_from_slice(src);
        }
        Ok(out)
    }

    /// Reads and checks the header at `offset`: the body length is checked
    /// against `max_body_bytes` and the segment's size before anything is
    /// sized by it.
    fn read_header(&self, offset: u64, max_body_bytes: u32) -> Result<Header, StoreError> {
        let corrupt = |source| StoreError::Corrupt {
            segment: self.seq,
            offset,
            source,
        };
        let available = self.bytes().saturating_sub(offset);
        if available < HEADER_BYTES as u64 {
            return Err(corrupt(record::RecordError::Truncated {
                needed_bytes: HEADER_BYTES as u64,
                available_bytes: available,
            }));
        }
        let mut header = [0u8; HEADER_BYTES];
        self.read_at(offset, &mut header)?;
        let header = record::decode_header(&header, max_body_bytes).map_err(corrupt)?;
        let needed = record::encoded_bytes(header.body_bytes);
        if needed > available {
            return Err(corrupt(record::RecordError::Truncated {
                needed_bytes: needed,
                available_bytes: available,
            }));
        }
        Ok(header)
    }

    /// Reads the body of a checked header at `offset` and verifies it.
    fn read_body(&self, offset: u64, header: &Header) -> Result<Bytes, StoreError> {
        let mut body = vec![0u8; header.body_bytes as usize];
        self.read_at(offset + HEADER_BYTES as u64, &mut body)?;
        record::verify(header, &body).map_err(|source| StoreError::Corrupt {
            segment: self.seq,
            offset,
            source,
        })?;
        Ok(Bytes::from(body))
    }

    /// Reads the record at `location`, checking that it is record `id` with
    /// the expected length and an intact checksum.
    pub(super) fn read(
        &self,
        location: Location,
        id: u64,
        max_body_bytes: u32,
    ) -> Result<Bytes, StoreError> {
        let offset = u64::from(location.offset);
        if offset + location.record_bytes() > self.bytes() {
            return Err(StoreError::OutOfBounds {
                location,
                segment_bytes: self.bytes(),
            });
        }
        let header = self.read_header(offset, max_body_bytes)?;
        expect_record(&header, location, id)?;
        self.read_body(offset, &header)
    }

    /// A cursor over the records from the start of the file.
    pub(super) fn cursor(&self, max_body_bytes: u32) -> Cursor<'_> {
        Cursor {
            segment: self,
            offset: 0,
            ordinal: 0,
            max_body_bytes,
            done: false,
        }
    }
}

/// One record found by a [`Cursor`].
#[derive(Debug, Clone)]
pub(super) struct CursorRecord {
    pub(super) id: u64,
    pub(super) location: Location,
    pub(super) body: Bytes,
}

/// Walks a segment's records in order. Yields `Err` once, for a torn or
/// corrupt record, and then stops: nothing after a bad record is trusted.
pub(super) struct Cursor<'a> {
    segment: &'a Segment,
    offset: u64,
    ordinal: u32,
    max_body_bytes: u32,
    done: bool,
}

impl Cursor<'_> {
    /// The offset the cursor stopped at (where the next record would be).
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    fn step(&mut self) -> Result<CursorRecord, StoreError> {
        let header = self.segment.read_header(self.offset, self.max_body_bytes)?;
        let body = self.segment.read_body(self.offset, &header)?;
        let offset = u32::try_from(self.offset).map_err(|_| StoreError::Exhausted {
            what: "segment offsets",
        })?;
        let location = Location {
            segment: self.segment.seq,
            offset,
            body_bytes: header.body_bytes,
            ordinal: self.ordinal,
        };
        self.offset += location.record_bytes();
        self.ordinal = self.ordinal.checked_add(1).ok_or(StoreError::Exhausted {
            what: "record ordinals",
        })?;
        Ok(CursorRecord {
            id: header.id,
            location,
            body,
        })
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<CursorRecord, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset >= self.segment.bytes() {
            return None;
        }
        let item = self.step();
        if item.is_err() {
            self.done = true;
        }
        Some(item)
    }
}

/// Checks that a decoded header is the one `location` names: record `id`,
/// of the expected length.
pub(super) fn expect_record(
    header: &Header,
    location: Location,
    id: u64,
) -> Result<(), StoreError> {
    if header.id == id && header.body_bytes == location.body_bytes {
        return Ok(());
    }
    Err(StoreError::WrongRecord {
        segment: location.segment,
        offset: u64::from(location.offset),
        expected_id: id,
        found_id: header.id,
        expected_body_bytes: location.body_bytes,
        found_body_bytes: header.body_bytes,
    })
}

/// The body of the record `location` names, found at `at` in `buffer` (a
/// read of the file that holds it): header decoded under `max_body_bytes`,
/// checked against `location` and `id`, and the body's CRC verified.
pub(super) fn body_at(
    buffer: &Bytes,
    at: usize,
    location: Location,
    id: u64,
    max_body_bytes: u32,
) -> Result<Bytes, StoreError> {
    let corrupt = |source| StoreError::Corrupt {
        segment: location.segment,
        offset: u64::from(location.offset),
        source,
    };
    let header_bytes = buffer
        .get(at..at + HEADER_BYTES)
        .ok_or(StoreError::OutOfBounds {
            location,
            segment_bytes: 0,
        })?;
    let header = record::decode_header(header_bytes, max_body_bytes).map_err(corrupt)?;
    expect_record(&header, location, id)?;
    let body = at + HEADER_BYTES..at + HEADER_BYTES + header.body_bytes as usize;
    if body.end > buffer.len() {
        return Err(StoreError::OutOfBounds {
            location,
            segment_bytes: 0,
        });
    }
    let body = buffer.slice(body);
    record::verify(&header, &body).map_err(corrupt)?;
    Ok(body)
}
