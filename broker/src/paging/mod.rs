//! Paged message bodies: a store of byte records keyed by a u64 id, in
//! append-only segment files, one directory per store.
//!
//! Architecture invariant: this module knows nothing of Raft, openraft,
//! queues or AMQP. It stores bytes under ids and hands back `Location`s; the
//! caller (the quorum state machine) decides what to page, keeps the
//! id → `Location` index and persists it.
//!
//! # On disk
//!
//! A directory of segment files `<seq:020>.seg` (sequence numbers are never
//! reused), plus transient `<seq:020>.seg.tmp` compaction outputs. A
//! segment is a sequence of records with no file header:
//!
//! ```text
//! body length u32 LE | id u64 LE | CRC32C(id LE bytes ‖ body) u32 LE | body
//! ```
//!
//! # In memory
//!
//! Per record the caller keeps a 16-byte [`Location`] (segment, offset,
//! body length, ordinal). Per segment the store keeps an open file handle,
//! a live bitmap of one bit per record written into it, and counters. The
//! active segment also holds up to `write_buffer_bytes` of unwritten
//! appends.
//!
//! # Crash protocol
//!
//! 1. `append` encodes into the active segment's buffer; the buffer is
//!    written (no fsync) when full or when the segment rolls. Nothing is
//!    durable yet.
//! 2. `sync` writes every buffer, fdatasyncs every segment written since the
//!    last sync, then fsyncs the directory if a segment file was created,
//!    renamed or removed. After it returns, every `Location` handed out
//!    before it names durable bytes under a durable name.
//! 3. The caller records `Location`s in its persisted state (a snapshot)
//!    only after step 2.
//! 4. After a crash, `open` deletes `*.seg.tmp`, lists the segments
//!    (sizes only, no bodies read) and seals them all: new appends go to a
//!    new segment, never after a tail that may be torn.
//!    `restore_live(locations from the persisted state)` rebuilds the live
//!    bitmaps and deletes segments with nothing live; it reports locations
//!    whose segment is gone (see below).
//! 5. `release` of the last live record of a sealed segment removes its
//!    file at once. If the node crashes before the caller persists that
//!    release, its older persisted state still names the record: the
//!    caller sees it in `Restored::missing` and must release it again when
//!    it replays its log (Raft does). A Location in `missing` that the log
//!    does not release is lost data, and the caller must treat it so.
//! 6. Compaction: see `compact.rs` (temp file, fdatasync, rename,
//!    directory fsync, retire; old files removed by `delete_retired` only
//!    after the caller persisted the moves).
//!
//! An IO error on write, sync or a directory change poisons the store:
//! after a failed fsync the kernel may have dropped the dirty pages, so
//! retrying could report durability that is not there.

mod compact;
mod detached;
mod error;
mod live;
mod location;
mod options;
mod read_batch;
pub mod record;
mod segment;
mod store;

#[cfg(test)]
mod tests;

pub use compact::Compaction;
pub use detached::{PendingSync, StoreReader};
pub use error::StoreError;
pub use location::{Location, Move};
pub use options::{
    StoreOptions, MAX_RECORD_BYTES_DEFAULT, SEGMENT_MAX_BYTES_DEFAULT,
    WRITEBACK_STEP_BYTES_DEFAULT, WRITE_BUFFER_BYTES_DEFAULT,
};
pub use record::RecordError;
pub use store::{Released, Restored, Scan, ScanTail, ScannedRecord, SegmentStore, StoreStats};
