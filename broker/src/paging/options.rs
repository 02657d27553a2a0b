//! `StoreOptions`: the limits of one segment store, with defaults and the
//! relations between them checked when a store is opened.

use super::error::StoreError;
use super::record::HEADER_BYTES;

/// Limits of a [`SegmentStore`](super::SegmentStore).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// A segment that has reached this size is sealed and appends go to a
    /// new one. A single record larger than this gets a segment of its own.
    pub segment_max_bytes: u32,
    /// Bodies larger than this are refused on append and never read back:
    /// a length field on disk above it is treated as corruption.
    pub max_record_bytes: u32,
    /// Appends collect in a buffer of about this size before one write
    /// syscall; `sync`, a roll and a full buffer write it out.
    pub write_buffer_bytes: u32,
    /// Written bytes of a segment after which the kernel is asked to start
    /// their writeback (see `Segment::flush`); 0: never asked.
    pub writeback_step_bytes: u32,
}

/// 64 MiB: large enough that a segment's file operations are rare, small
/// enough that compaction copies little at a time.
pub const SEGMENT_MAX_BYTES_DEFAULT: u32 = 64 * 1024 * 1024;
/// 128 MiB: the broker's default `max_message_size_bytes`.
pub const MAX_RECORD_BYTES_DEFAULT: u32 = 128 * 1024 * 1024;
/// 256 KiB of appends per write syscall.
pub const WRITE_BUFFER_BYTES_DEFAULT: u32 = 256 * 1024;
/// 4 MiB: 16 write buffers. Small enough that a step's writeback does not
/// hold a log fsync back for long, large enough to be one fadvise call
/// per some 16,000 bodies of 256 B.
pub const WRITEBACK_STEP_BYTES_DEFAULT: u32 = 4 * 1024 * 1024;

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            segment_max_bytes: SEGMENT_MAX_BYTES_DEFAULT,
            max_record_bytes: MAX_RECORD_BYTES_DEFAULT,
            write_buffer_bytes: WRITE_BUFFER_BYTES_DEFAULT,
            writeback_step_bytes: WRITEBACK_STEP_BYTES_DEFAULT,
        }
    }
}

impl StoreOptions {
    /// Checks the relations between the limits.
    pub(super) fn validate(&self) -> Result<(), StoreError> {
        if (self.segment_max_bytes as usize) < HEADER_BYTES {
            return Err(StoreError::InvalidOptions {
                reason: "segment_max_bytes is smaller than one record header",
            });
        }
        // A record's end offset must fit the u64 arithmetic trivially, and
        // its start offset fits a u32 because a segment is rolled once it
        // passes segment_max_bytes (a u32).
        if self.write_buffer_bytes == 0 {
            return Err(StoreError::InvalidOptions {
                reason: "write_buffer_bytes is zero",
            });
        }
        Ok(())
    }
}
