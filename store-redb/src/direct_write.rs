//! Durable journal writes without an `fdatasync`: the journal file opened
//! a second time with `O_DIRECT | O_DSYNC`, so that each write bypasses
//! the page cache and returns once the device holds it (a write with
//! forced unit access, or a write and a cache flush on a device without
//! it), the same promise as a write followed by `fdatasync`.
//!
//! Why: the journal's `fdatasync` is the step of a quorum publish that
//! varies most under load, because it also waits for whatever else the
//! page cache is writing back (the fold into redb, segment files). Three
//! writers each making 200 KB durable in a loop on this machine's disk,
//! beside three buffered background writers: p50 0.40 ms and p99 2.1 ms
//! with `pwrite` + `fdatasync`, p50 0.23-0.31 ms and p99 0.6-0.8 ms with
//! `O_DIRECT | O_DSYNC` (`docs/benchmarks.md`, session 39).
//!
//! `O_DIRECT` wants the buffer, the offset and the length aligned to the
//! device's logical block. The journal packs its records, so a write
//! starts at the block that holds the record's first byte, writes again
//! the part of that block earlier records filled (kept in `tail`; the
//! same bytes, so a torn write leaves them as they were) and fills the
//! last block with zeros, where the next record will go (a scan of the
//! journal stops at zeros anyway).
//!
//! Knows nothing of records, regions or generations (`journal.rs`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The alignment asked of offsets, lengths and buffers: 4 KiB covers
/// devices of 512 B and of 4 KiB logical blocks.
pub(crate) const BLOCK: u64 = 4096;
/// Scratch space above this is not kept between writes.
const SCRATCH_KEPT: usize = 1 << 20;

/// The journal file opened for direct, synchronous writes.
pub(crate) struct DirectWriter {
    file: File,
    /// Where the block that the last write ended in begins.
    tail_at: u64,
    /// The bytes of that block the last write filled (fewer than a block).
    tail: Vec<u8>,
    /// Room for one write, one block larger than it so that an aligned
    /// window fits whatever the allocator's alignment.
    scratch: Vec<u8>,
}

impl DirectWriter {
    /// Opens `path` (which must exist) for direct, synchronous writes.
    /// `Ok(None)` when its file system does not do direct I/O (tmpfs
    /// answers `EINVAL`).
    pub(crate) fn open(path: &Path) -> io::Result<Option<DirectWriter>> {
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path);
        match opened {
            Ok(file) => Ok(Some(DirectWriter {
                file,
                tail_at: 0,
                tail: Vec::new(),
                scratch: Vec::new(),
            })),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` at `at` and returns once they are durable. `at` must
    /// begin a block or be where the previous write ended; anything else
    /// is refused with `InvalidInput` before any I/O.
    #[cfg(test)]
    pub(crate) fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_with(at, bytes.len(), |window| window.copy_from_slice(bytes))
    }

    /// Writes `n` bytes at `at`, which `fill` puts into the slice it is
    /// given (exactly `n` bytes of the aligned buffer that goes to the
    /// disk: the journal encodes its record there, so the record is not
    /// copied again), and returns once they are durable. `at` as for
    /// [`DirectWriter::write`]; `fill` is not called when it is refused.
    pub(crate) fn write_with(
        &mut self,
        at: u64,
        n: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> io::Result<()> {
        let start = at - at % BLOCK;
        let head_len = (at - start) as usize;
        if head_len != 0 && (self.tail_at != start || self.tail.len() != head_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a direct journal write must start a block or follow the previous write",
            ));
        }
        let len = head_len + n;
        let padded = len.div_ceil(BLOCK as usize) * BLOCK as usize;
        if self.scratch.len() < padded + BLOCK as usize {
            self.scratch = vec![0; padded + BLOCK as usize];
        }
        let skip = self.scratch.as_ptr().align_offset(BLOCK as usize);
        let Some(window) = self.scratch.get_mut(skip..skip + padded) else {
            return Err(io::Error::other("no aligned window in the scratch buffer"));
        };
        // Empty when the write starts a block (the tail is then not needed).
        window[..head_len].copy_from_slice(&self.tail[..head_len]);
        fill(&mut window[head_len..len]);
        window[len..].fill(0);
        self.file.write_all_at(window, start)?;
        let end = start + len as u64;
        let new_tail_at = end - end % BLOCK;
        let kept = (end - new_tail_at) as usize;
        self.tail.clear();
        self.tail.extend_from_slice(&window[len - kept..len]);
        self.tail_at = new_tail_at;
        if self.scratch.len() > SCRATCH_KEPT + BLOCK as usize {
            self.scratch = Vec::new();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::disk_dir;

    #[test]
    fn packed_writes_land_byte_for_byte() {
        let dir = disk_dir();
        let path = dir.path().join("journal");
        std::fs::write(&path, vec![0xee; 64 * 1024]).expect("file");
        let Some(mut writer) = DirectWriter::open(&path).expect("open") else {
            eprintln!(
                "no O_DIRECT under {}: nothing to test",
                dir.path().display()
            );
            return;
        };
        let mut expected = vec![0xee; 64 * 1024];
        let mut at = 0u64;
        // Records of awkward sizes, packed: within a block, across one,
        // ending on a boundary, larger than several.
        for (i, len) in [10usize, 4000, 86, 4096, 1, 12_345, 3, 8192 - 3]
            .iter()
            .enumerate()
        {
            let record = vec![i as u8 + 1; *len];
            writer.write(at, &record).expect("write");
            let end = at as usize + len;
            expected[at as usize..end].copy_from_slice(&record);
            // What follows the record up to its block's end is zeros.
            let block_end = end.div_ceil(BLOCK as usize) * BLOCK as usize;
            expected[end..block_end].fill(0);
            at += *len as u64;
            assert_eq!(
                std::fs::read(&path).expect("read"),
                expected,
                "after record {i}"
            );
        }
        // A new region starts at a block: no tail needed.
        writer.write(32 * 1024, b"region").expect("aligned write");
        expected[32 * 1024..32 * 1024 + 6].copy_from_slice(b"region");
        expected[32 * 1024 + 6..36 * 1024].fill(0);
        assert_eq!(std::fs::read(&path).expect("read"), expected);
    }

    #[test]
    fn a_write_neither_aligned_nor_following_is_refused() {
        let dir = disk_dir();
        let path = dir.path().join("journal");
        std::fs::write(&path, vec![0u8; 16 * 1024]).expect("file");
        let Some(mut writer) = DirectWriter::open(&path).expect("open") else {
            return;
        };
        writer.write(0, &[1; 100]).expect("write");
        let refused = writer.write(101, &[2; 10]).expect_err("a gap");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        writer.write(100, &[2; 10]).expect("the next byte");
    }
}
