//! `Location`: where a record lives (segment, offset, body length, ordinal),
//! the compact value a caller keeps in its in-memory index; and `Move`, one
//! record relocated by compaction. Plain values, no IO.

use std::mem::size_of;

/// Where one record is: kept per paged message in the caller's index, so
/// it is small and `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// The segment's sequence number (its file name).
    pub segment: u32,
    /// Byte offset of the record's header in the segment file.
    pub offset: u32,
    /// Length of the record's body in bytes (the header is not counted).
    pub body_bytes: u32,
    /// The record's position among the records written into the segment
    /// (0 for the first); the key of the segment's live bitmap.
    pub ordinal: u32,
}

// The caller keeps one Location per paged message in memory.
const _: () = assert!(size_of::<Location>() <= 16);

impl Location {
    /// Bytes the record takes on disk, header included.
    pub fn record_bytes(&self) -> u64 {
        super::record::encoded_bytes(self.body_bytes)
    }
}

/// One record that compaction copied into a new segment: the caller must
/// replace `from` by `to` in its index for record `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The record's id.
    pub id: u64,
    /// Where it was (its segment is now retired).
    pub from: Location,
    /// Where it is now.
    pub to: Location,
}
