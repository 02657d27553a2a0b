//! redb table definitions and key encoding: the only place that knows the
//! on-disk layout.
//!
//! Three tables, shared by every Raft group of the node:
//!
//! | table | key | value |
//! |---|---|---|
//! | `raft_entries` | `(group_id: u64, index: u64)` | framed record of one `C::Entry`; at index [`COMMITTED_INDEX`] the group's committed log id |
//! | `raft_meta` | `(group_id: u64, kind: u8)` | framed record of the vote or last-purged log id |
//! | `store_format` | `&str`: `"version"`, `"journal_folded"` | `u64`: layout version; last journal generation folded into the tables |
//!
//! redb orders tuple keys field by field, so one group's entries are one
//! contiguous key range, in index order, followed by its committed log id.
//! A "framed record" is described in [`crate::record`].
//!
//! Why the committed log id lives among the entries (layout 2): it is
//! written with nearly every append (a leader's commit index moves with
//! each entry), and in `raft_meta` it cost every such commit a second
//! copied-on-write tree (a leaf of `raft_meta`, about 4 KB, and the update
//! of its root). Keyed right after the group's last entry, it sits in the
//! leaf the append dirties anyway. Layout 1 files are converted at open
//! ([`crate::store`]).

use std::fmt;

use redb::TableDefinition;

/// Log entries of all groups, keyed by `(group_id, index)`.
pub(crate) const ENTRIES: TableDefinition<'static, (u64, u64), &[u8]> =
    TableDefinition::new("raft_entries");

/// Per-group metadata, keyed by `(group_id, MetaKind as u8)`: the vote and
/// the last purged log id (the committed log id is in [`ENTRIES`] since
/// layout 2).
pub(crate) const META: TableDefinition<'static, (u64, u8), &[u8]> =
    TableDefinition::new("raft_meta");

/// The layout version of the whole file.
pub(crate) const FORMAT: TableDefinition<'static, &str, u64> = TableDefinition::new("store_format");

/// The key of the layout version in [`FORMAT`].
pub(crate) const FORMAT_KEY: &str = "version";

/// The generation of the append journal last folded into the tables
/// (`journal.rs`), in [`FORMAT`]; absent means 0, nothing folded yet.
pub(crate) const JOURNAL_FOLDED_KEY: &str = "journal_folded";

/// The layout this build writes. Bump it on any change to the tables, the
/// record framing or what lives beside the file. 2: the committed log id
/// moved from `raft_meta` into `raft_entries` at [`COMMITTED_INDEX`]. 3:
/// appends may sit in the journal beside the file until folded, so a build
/// that does not read the journal must not open the file.
pub(crate) const FORMAT_VERSION: u64 = 3;

/// The oldest layout this build converts at open (the committed log ids
/// move from `raft_meta` to `raft_entries`, in one transaction).
pub(crate) const FORMAT_VERSION_CONVERTED: u64 = 1;

/// Layout 2: the tables of layout 3, without a journal beside them (there
/// is nothing to convert).
pub(crate) const FORMAT_VERSION_WITHOUT_JOURNAL: u64 = 2;

/// The index under which a group's committed log id is stored in
/// [`ENTRIES`]: after every log index, so a group's entries are the key
/// range `(group_id, 0)..(group_id, COMMITTED_INDEX)` and the committed row
/// shares the leaf of the group's newest entries. No Raft log reaches this
/// index.
pub(crate) const COMMITTED_INDEX: u64 = u64::MAX;

/// What a `raft_meta` row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MetaKind {
    /// The last saved `Vote`.
    Vote = 1,
    /// The last saved committed `Option<LogId>`.
    Committed = 2,
    /// The `LogId` of the last purged entry.
    LastPurged = 3,
}

impl MetaKind {
    /// Every kind, for removing a group.
    pub(crate) const ALL: [MetaKind; 3] =
        [MetaKind::Vote, MetaKind::Committed, MetaKind::LastPurged];

    /// The key of this kind for `group_id` in [`META`].
    pub(crate) fn key(self, group_id: u64) -> (u64, u8) {
        (group_id, self as u8)
    }

    /// The kind stored under the byte `b`, if any.
    pub(crate) fn from_u8(b: u8) -> Option<MetaKind> {
        MetaKind::ALL.into_iter().find(|k| *k as u8 == b)
    }
}

/// The identity of one stored record, used in its checksum and in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKey {
    /// An entry of `raft_entries`.
    Entry {
        /// The Raft group.
        group_id: u64,
        /// The log index.
        index: u64,
    },
    /// A row of `raft_meta`.
    Meta {
        /// The Raft group.
        group_id: u64,
        /// What the row holds; `Err(byte)` for an unknown kind byte.
        kind: Result<MetaKind, u8>,
    },
}

/// Length of [`RecordKey::checksum_bytes`].
pub(crate) const KEY_CHECKSUM_LEN: usize = 17;

impl RecordKey {
    /// The key of `raft_meta` row `(group_id, kind)`.
    pub(crate) fn meta(group_id: u64, kind: u8) -> RecordKey {
        RecordKey::Meta {
            group_id,
            kind: MetaKind::from_u8(kind).ok_or(kind),
        }
    }

    /// The bytes that identify the record inside its checksum: a table tag,
    /// the group id and the index or kind, big-endian. A record copied under
    /// another key fails its checksum.
    pub(crate) fn checksum_bytes(&self) -> [u8; KEY_CHECKSUM_LEN] {
        let mut out = [0u8; KEY_CHECKSUM_LEN];
        let (tag, group_id, second) = match *self {
            RecordKey::Entry { group_id, index } => (b'E', group_id, index),
            RecordKey::Meta { group_id, kind } => {
                let byte = match kind {
                    Ok(k) => k as u8,
                    Err(b) => b,
                };
                (b'M', group_id, u64::from(byte))
            }
        };
        out[0] = tag;
        out[1..9].copy_from_slice(&group_id.to_be_bytes());
        out[9..17].copy_from_slice(&second.to_be_bytes());
        out
    }
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordKey::Entry { group_id, index } => {
                write!(f, "raft_entries[group {group_id}, index {index}]")
            }
            RecordKey::Meta { group_id, kind } => match kind {
                Ok(k) => write!(f, "raft_meta[group {group_id}, {k:?}]"),
                Err(b) => write!(f, "raft_meta[group {group_id}, unknown kind {b}]"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_bytes_differ_by_table_group_and_index() {
        let a = RecordKey::Entry {
            group_id: 1,
            index: 2,
        }
        .checksum_bytes();
        let b = RecordKey::Entry {
            group_id: 2,
            index: 1,
        }
        .checksum_bytes();
        let c = RecordKey::meta(1, 2).checksum_bytes();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn meta_kind_round_trips_through_its_byte() {
        for k in MetaKind::ALL {
            assert_eq!(MetaKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(MetaKind::from_u8(0), None);
    }
}
