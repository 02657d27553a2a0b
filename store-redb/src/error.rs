//! The crate's one error type, [`Error`], and its conversion into the
//! `std::io::Error` openraft 0.10's storage traits return.
//!
//! Every failure of this crate is an [`Error`]: redb failures, records that
//! fail their CRC32C check or do not decode, a log with a hole where an entry
//! should be, and misuse of the API (a group opened twice, an append that
//! would leave a hole). Inside the [`openraft::storage::RaftLogStorage`]
//! implementation they are wrapped in an `io::Error` (kind `Other`, this
//! error as its source), which openraft turns into a `StorageError` that
//! stops the Raft group: a storage error is never retried.

use std::sync::Arc;

use crate::tables::RecordKey;

/// An error of the log store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// redb reported an error: I/O, a database file it finds corrupted, a
    /// failed commit.
    #[error("redb: {0}")]
    Database(#[from] redb::Error),

    /// A stored record failed its CRC32C check: its bytes are not the bytes
    /// that were written. The record is not served.
    #[error("{key}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    ChecksumMismatch {
        /// Which record.
        key: RecordKey,
        /// The CRC32C found in the record's frame.
        stored: u32,
        /// The CRC32C of the key and payload as read.
        computed: u32,
    },

    /// A stored record is shorter than its frame header.
    #[error("{key}: record of {n_bytes} bytes is shorter than its frame header")]
    RecordTruncated {
        /// Which record.
        key: RecordKey,
        /// The record's length.
        n_bytes: usize,
    },

    /// A record passed its checksum but its payload does not decode (or has
    /// trailing bytes): written by an incompatible version, or a bug.
    #[error("{key}: payload does not decode: {reason}")]
    Decode {
        /// Which record.
        key: RecordKey,
        /// What the decoder said.
        reason: String,
    },

    /// A value could not be serialized.
    #[error("{key}: payload does not encode: {source}")]
    Encode {
        /// Which record.
        key: RecordKey,
        /// What the encoder said.
        source: postcard::Error,
    },

    /// An entry stored under one index carries another index.
    #[error("group {group_id}: entry stored at index {index} carries index {found}")]
    IndexMismatch {
        /// The Raft group.
        group_id: u64,
        /// The index in the key.
        index: u64,
        /// The index in the entry's log id.
        found: u64,
    },

    /// The database was written in a layout this version does not read.
    #[error("store format {found} is not supported (this version reads format {supported})")]
    UnsupportedFormat {
        /// The format version in the file.
        found: u64,
        /// The format version this build reads and writes.
        supported: u64,
    },

    /// [`LogStore::group`](crate::LogStore::group) was called for a group
    /// that already has a live [`GroupLogStore`](crate::GroupLogStore), or
    /// [`LogStore::remove_group`](crate::LogStore::remove_group) for a group
    /// that is open.
    #[error("group {group_id} is open")]
    GroupOpen {
        /// The Raft group.
        group_id: u64,
    },

    /// The group is held in memory with another openraft type config.
    #[error("group {group_id} is open with another type config")]
    GroupTypeMismatch {
        /// The Raft group.
        group_id: u64,
    },

    /// The writer thread has stopped: the store is closing, or the thread
    /// died.
    #[error("the writer thread has stopped")]
    WriterStopped,

    /// The writer thread could not be started.
    #[error("starting the writer thread: {0}")]
    WriterSpawn(#[source] std::io::Error),

    /// Reading, writing or syncing the append journal failed
    /// (`journal.rs`).
    #[error("append journal: {0}")]
    Journal(#[source] std::io::Error),

    /// A journal record with a right checksum does not decode: written by
    /// an incompatible version, or a bug. The store refuses to open rather
    /// than drop the appends it may hold.
    #[error("append journal: record at offset {offset} does not decode: {reason}")]
    JournalCorrupt {
        /// Where the record starts in the journal file.
        offset: u64,
        /// What the decoder said.
        reason: String,
    },

    /// The write transaction holding this request failed. Every request of
    /// that transaction gets this error, and every request after it too: the
    /// store refuses writes until it is reopened, since the in-memory tails
    /// no longer match the disk.
    #[error("write failed: {0}")]
    Write(#[source] Arc<Error>),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::Database(redb::Error::from(e))
            }
        }
    )*};
}

from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
    redb::CompactionError
);

impl Error {
    /// Whether the database file is held open by another `LogStore` of
    /// this process (e.g. one still shutting down).
    pub fn is_already_open(&self) -> bool {
        matches!(self, Error::Database(redb::Error::DatabaseAlreadyOpen))
    }

    /// Wraps this error as the `io::Error` openraft's storage traits
    /// return, saying what was being done (`doing`).
    pub(crate) fn into_io(self, doing: &'static str) -> std::io::Error {
        std::io::Error::other(Doing {
            doing,
            source: self,
        })
    }
}

/// An [`Error`] with what the store was doing when it happened.
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub(crate) struct Doing {
    doing: &'static str,
    #[source]
    source: Error,
}
