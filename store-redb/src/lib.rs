//! openraft log, vote and metadata storage on redb, one database for all
//! Raft groups of a node, with group commit (one fsync for many groups).
//!
//! - [`LogStore`]: the node-wide store (one redb file, one writer thread);
//!   [`LogStore::group`] gives a group's [`GroupLogStore`], which implements
//!   openraft's `RaftLogStorage` and `RaftLogReader` for any type config
//!   whose entries are `Clone + Serialize + DeserializeOwned`.
//! - Writes of all groups go through one writer thread that commits whatever
//!   is queued in ONE redb transaction with one fsync, then completes every
//!   waiter ([`BatchStats`] counts it).
//! - Every stored record carries a CRC32C over its key and payload, checked
//!   on every read.
//! - A file left mostly free by purges (a drained deep queue) is compacted
//!   by the writer once the store has been idle for a few seconds
//!   (`compact`).
//!
//! Module map: `store` (the node-wide handle) → `raft` (openraft trait
//! impls) → `group` (a group's state and read path) and `tail` (appended,
//! not yet durable entries) → `writer` (the group-commit thread) →
//! `apply` (how each write lands in a transaction's tables) and `journal`
//! (the append journal; `journal_record` its framing) → `record` (CRC
//! framing, postcard) and `tables` (redb tables, keys);
//! `layout` (the file's layout version, older layouts converted at open);
//! `compact` (when and how the file gives back its free space); `error`,
//! `stats`; `fuzz_checks` (the fuzz targets' record check); `lossy_file`
//! (feature `test-backends`: a backend that loses unsynced writes at a
//! simulated power cut, for crash tests).
//!
//! `README.md` beside this crate documents the data layout, the group-commit
//! protocol, the durability guarantees and what redb promises on a crash.
#![warn(unreachable_pub, missing_docs)]
#![forbid(unsafe_code)]

mod apply;
mod compact;
mod direct_write;
mod error;
mod fold;
#[doc(hidden)]
pub mod fuzz_checks;
mod group;
mod journal;
mod journal_record;
mod layout;
#[cfg(any(test, feature = "test-backends"))]
pub mod lossy_file;
mod purge_backlog;
mod raft;
mod record;
mod stats;
mod store;
mod tables;
mod tail;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_journal;
mod writer;

pub use error::Error;
pub use group::{GroupLogReader, GroupLogStore};
pub use stats::{BatchStats, BatchStatsSnapshot, COMMIT_TIME_BUCKETS_SECONDS};
pub use store::{
    LogStore, LogStoreOptions, VerifyReport, BATCH_REQUESTS_MAX_DEFAULT, CACHE_SIZE_BYTES_DEFAULT,
    JOURNAL_BYTES_DEFAULT, WRITE_QUEUE_CAPACITY_REQUESTS_DEFAULT,
};
pub use tables::{MetaKind, RecordKey};
