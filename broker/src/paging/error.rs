//! `StoreError`: every way a segment store operation can fail, each variant
//! saying whether it is the disk (IO, corruption) or the caller (a stale or
//! wrong location, a body over the limit, a call out of order).

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use super::location::Location;
use super::record::RecordError;

/// An error of a [`SegmentStore`](super::SegmentStore) operation.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The options contradict each other.
    #[error("invalid segment store options: {reason}")]
    InvalidOptions {
        /// Which relation does not hold.
        reason: &'static str,
    },
    /// A file system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the store was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A record on disk failed its checks; its bytes are never served.
    #[error("segment {segment} offset {offset}: {source}")]
    Corrupt {
        /// The segment.
        segment: u32,
        /// The record's offset.
        offset: u64,
        /// What is wrong with it.
        source: RecordError,
    },
    /// The record at a location has another id or length than the caller
    /// expects: the caller's index is wrong.
    #[error("segment {segment} offset {offset}: expected record {expected_id} ({expected_body_bytes} bytes), found {found_id} ({found_body_bytes} bytes)")]
    WrongRecord {
        /// The segment.
        segment: u32,
        /// The record's offset.
        offset: u64,
        /// The id the caller asked for.
        expected_id: u64,
        /// The id on disk.
        found_id: u64,
        /// The body length in the location.
        expected_body_bytes: u32,
        /// The body length on disk.
        found_body_bytes: u32,
    },
    /// A location points past the end of its segment.
    #[error("{location:?} is past the end of its segment ({segment_bytes} bytes)")]
    OutOfBounds {
        /// The location.
        location: Location,
        /// The segment's size.
        segment_bytes: u64,
    },
    /// The segment does not exist (it never did, it was emptied and deleted,
    /// or it was compacted and its file deleted): the caller's index is stale.
    #[error("segment {segment} does not exist (emptied, compacted away, or never written)")]
    SegmentGone {
        /// The segment.
        segment: u32,
    },
    /// The segment was compacted: its live records were moved and the
    /// caller must use the new locations.
    #[error("segment {segment} was compacted; its records have moved")]
    Compacted {
        /// The segment.
        segment: u32,
    },
    /// `release` of a location that is not live (released twice, or never
    /// restored): the caller's index is wrong.
    #[error("{location:?} is not live")]
    NotLive {
        /// The location.
        location: Location,
    },
    /// `restore_live` was given the same location twice.
    #[error("{location:?} restored twice")]
    DuplicateLocation {
        /// The location.
        location: Location,
    },
    /// A body over `max_record_bytes`.
    #[error("record body of {body_bytes} bytes is over max_record_bytes {max_record_bytes}")]
    BodyTooLarge {
        /// The body's length.
        body_bytes: u64,
        /// The limit.
        max_record_bytes: u32,
    },
    /// An earlier write or sync failed; what reached the disk is unknown,
    /// so the store refuses every further change (reads still work).
    #[error("segment store is poisoned by an earlier write or sync failure")]
    Poisoned,
    /// The store was opened on existing segments and `restore_live` has not
    /// been called yet: without it every record would count as dead.
    #[error("restore_live must be called before changing a reopened store")]
    RestoreRequired,
    /// `restore_live` after the store has been changed, or a second time.
    #[error("restore_live is allowed once, before any change")]
    AlreadyRestored,
    /// Compaction could not read every live record of a segment; the
    /// segment was left as it was.
    #[error("compaction of segment {segment}: {n_live} live records, {n_found} found")]
    LiveRecordsMissing {
        /// The segment.
        segment: u32,
        /// Live records the store expected.
        n_live: u32,
        /// Live records it could read.
        n_found: u32,
    },
    /// Segment sequence numbers or record ordinals ran out (u32).
    #[error("segment store ran out of {what}")]
    Exhausted {
        /// Segment numbers or ordinals.
        what: &'static str,
    },
}

impl StoreError {
    pub(super) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
