//! openraft log, vote and metadata storage on redb, one database for all
//! Raft groups of a node, with group commit (one fsync for many groups).
//!
//! See `README.md` beside this crate for the data layout, the group-commit
//! protocol and the durability guarantees.
#![warn(unreachable_pub, missing_docs)]

mod error;
mod group;
mod raft;
mod record;
mod stats;
mod store;
mod tables;
mod tail;
#[cfg(test)]
mod tests;
mod writer;

pub use error::Error;
pub use group::{GroupLogReader, GroupLogStore};
pub use stats::{BatchStats, BatchStatsSnapshot};
pub use store::{
    LogStore, LogStoreOptions, VerifyReport, BATCH_REQUESTS_MAX_DEFAULT, CACHE_SIZE_BYTES_DEFAULT,
    WRITE_QUEUE_CAPACITY_REQUESTS_DEFAULT,
};
pub use tables::{MetaKind, RecordKey};
