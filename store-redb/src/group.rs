//! One Raft group's view of the store: its in-memory state
//! ([`GroupShared`]), its writing handle ([`GroupLogStore`]) and its reading
//! handle ([`GroupLogReader`]). The openraft trait implementations are in
//! [`crate::raft`].
//!
//! Ownership: a group's state is one `Arc<GroupShared<C>>`, shared by the
//! group's single `GroupLogStore` (the only handle that issues writes, so
//! one group's requests reach the writer in order), any number of
//! `GroupLogReader`s, and the completions of its in-flight appends (which
//! run on the writer thread and drop now-durable entries from the tail).
//! Everything mutable sits behind one `std::sync::Mutex`, never held across
//! an `.await` nor while waiting for the writer.
//!
//! The logical log is `first_index ..= last_log_id.index`, where
//! `first_index` is one past the last purged index (0 if nothing was
//! purged). Its entries from `tail.first_index()` on are in the tail; the
//! ones before are durable on disk. Truncate and purge update the logical
//! log at once and the disk later (in order, through the writer), so reads
//! clamp to the logical log and never serve an entry that a pending
//! truncate or purge has removed.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::{LogId, RaftLogId, RaftTypeConfig, Vote};
use redb::{Database, ReadOnlyTable, ReadableDatabase};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::record;
use crate::store::LogStore;
use crate::tables::{MetaKind, RecordKey, ENTRIES, META};
use crate::tail::Tail;

/// The in-memory state of one group.
pub(crate) struct GroupState<C: RaftTypeConfig> {
    /// The last durable vote.
    pub(crate) vote: Option<Vote<C::NodeId>>,
    /// The last committed log id handed to `save_committed`.
    pub(crate) committed: Option<LogId<C::NodeId>>,
    /// The last purged log id (logical: possibly not yet durable).
    pub(crate) last_purged: Option<LogId<C::NodeId>>,
    /// The last log id of the logical log, or `last_purged` if the log is
    /// empty.
    pub(crate) last_log_id: Option<LogId<C::NodeId>>,
    /// Appended entries not yet durable.
    pub(crate) tail: Tail<C::Entry>,
    /// Sequence number of the next append.
    pub(crate) next_write_seq: u64,
}

impl<C: RaftTypeConfig> GroupState<C> {
    /// The first index of the logical log.
    pub(crate) fn first_index(&self) -> u64 {
        self.last_purged.as_ref().map_or(0, |p| p.index + 1)
    }

    /// The index the next appended entry must have.
    pub(crate) fn next_index(&self) -> u64 {
        self.last_log_id.as_ref().map_or(0, |l| l.index + 1)
    }
}

/// State shared by every handle of one group.
pub(crate) struct GroupShared<C: RaftTypeConfig> {
    pub(crate) group_id: u64,
    /// Whether a [`GroupLogStore`] of this group is alive.
    claimed: AtomicBool,
    state: Mutex<GroupState<C>>,
}

/// A group's shared state with its type config erased, for the registry.
pub(crate) trait ErasedGroup: Send + Sync {
    /// Whether a `GroupLogStore` of this group is alive.
    fn is_claimed(&self) -> bool;
    /// The state as `Any`, to downcast to `GroupShared<C>`.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<C: RaftTypeConfig> ErasedGroup for GroupShared<C> {
    fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

type MetaTable = ReadOnlyTable<(u64, u8), &'static [u8]>;
type EntriesTable = ReadOnlyTable<(u64, u64), &'static [u8]>;

fn read_meta<T: DeserializeOwned>(
    meta: &MetaTable,
    group_id: u64,
    kind: MetaKind,
) -> Result<Option<T>, Error> {
    let key = RecordKey::Meta {
        group_id,
        kind: Ok(kind),
    };
    match meta.get(kind.key(group_id))? {
        Some(value) => record::decode(key, value.value()).map(Some),
        None => Ok(None),
    }
}

/// Decodes the entry record `value` stored at `(group_id, index)` and checks
/// that it carries that index.
fn decode_entry<C>(group_id: u64, index: u64, value: &[u8]) -> Result<C::Entry, Error>
where
    C: RaftTypeConfig,
    C::Entry: DeserializeOwned,
{
    let entry: C::Entry = record::decode(RecordKey::Entry { group_id, index }, value)?;
    let found = entry.get_log_id().index;
    if found != index {
        return Err(Error::IndexMismatch {
            group_id,
            index,
            found,
        });
    }
    Ok(entry)
}

/// Reads the entries `start..end` of `group_id` from `entries`, which must
/// all be present.
fn read_disk_entries<C>(
    entries: &EntriesTable,
    group_id: u64,
    start: u64,
    end: u64,
    out: &mut Vec<C::Entry>,
) -> Result<(), Error>
where
    C: RaftTypeConfig,
    C::Entry: DeserializeOwned,
{
    let mut expected = start;
    for row in entries.range((group_id, start)..(group_id, end))? {
        let (key, value) = row?;
        let (_, index) = key.value();
        if index != expected {
            return Err(Error::MissingEntry {
                group_id,
                index: expected,
            });
        }
        out.push(decode_entry::<C>(group_id, index, value.value())?);
        expected += 1;
    }
    if expected != end {
        return Err(Error::MissingEntry {
            group_id,
            index: expected,
        });
    }
    Ok(())
}

impl<C> GroupShared<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
{
    /// Loads the group's vote, committed and last-purged log ids and its
    /// last entry from disk (checksums verified).
    pub(crate) fn load(db: &Database, group_id: u64) -> Result<GroupShared<C>, Error> {
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        let vote = read_meta::<Vote<C::NodeId>>(&meta, group_id, MetaKind::Vote)?;
        let committed =
            read_meta::<Option<LogId<C::NodeId>>>(&meta, group_id, MetaKind::Committed)?.flatten();
        let last_purged = read_meta::<LogId<C::NodeId>>(&meta, group_id, MetaKind::LastPurged)?;
        let entries = txn.open_table(ENTRIES)?;
        let last_entry = match entries
            .range((group_id, 0)..=(group_id, u64::MAX))?
            .next_back()
        {
            Some(row) => {
                let (key, value) = row?;
                let (_, index) = key.value();
                Some(
                    decode_entry::<C>(group_id, index, value.value())?
                        .get_log_id()
                        .clone(),
                )
            }
            None => None,
        };
        let last_log_id = match (last_entry, &last_purged) {
            (Some(entry), Some(purged)) if purged.index >= entry.index => Some(purged.clone()),
            (Some(entry), _) => Some(entry),
            (None, purged) => purged.clone(),
        };
        Ok(GroupShared {
            group_id,
            claimed: AtomicBool::new(false),
            state: Mutex::new(GroupState {
                vote,
                committed,
                last_purged,
                last_log_id,
                tail: Tail::new(),
                next_write_seq: 0,
            }),
        })
    }

    /// Locks the group's state. A poisoned lock is taken over: the state is
    /// only mutated by short sections that do not panic on their own.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GroupState<C>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entries with index in `start..end` that the logical log holds:
    /// clamped to the log, disk part first, then the tail.
    pub(crate) fn read_entries(
        &self,
        db: &Database,
        start: u64,
        end: u64,
    ) -> Result<Vec<C::Entry>, Error> {
        let (disk_start, disk_end, tail_part, txn) = {
            let state = self.lock();
            let start = start.max(state.first_index());
            let end = end.min(state.next_index());
            if start >= end {
                return Ok(Vec::new());
            }
            let tail_start = state.tail.first_index().unwrap_or(end).max(start);
            let tail_part = state.tail.clone_range(tail_start, end);
            let disk_end = tail_start.min(end);
            // Taken under the lock: the snapshot holds every durable entry
            // below the tail that the logical log still has.
            let txn = if start < disk_end {
                Some(db.begin_read()?)
            } else {
                None
            };
            (start, disk_end, tail_part, txn)
        };
        let mut out = Vec::new();
        if let Some(txn) = txn {
            let n_disk = usize::try_from(disk_end - disk_start).unwrap_or(usize::MAX);
            out.reserve(n_disk.saturating_add(tail_part.len()));
            let entries = txn.open_table(ENTRIES)?;
            read_disk_entries::<C>(&entries, self.group_id, disk_start, disk_end, &mut out)?;
        }
        out.extend(tail_part);
        Ok(out)
    }

    /// The log id of the durable entry at `index`.
    pub(crate) fn disk_log_id(&self, db: &Database, index: u64) -> Result<LogId<C::NodeId>, Error> {
        let txn = db.begin_read()?;
        let entries = txn.open_table(ENTRIES)?;
        let mut out = Vec::with_capacity(1);
        read_disk_entries::<C>(&entries, self.group_id, index, index + 1, &mut out)?;
        match out.pop() {
            Some(entry) => Ok(entry.get_log_id().clone()),
            None => Err(Error::MissingEntry {
                group_id: self.group_id,
                index,
            }),
        }
    }
}

/// The log store of one Raft group: implements openraft's
/// [`RaftLogStorage`](openraft::storage::RaftLogStorage) and
/// [`RaftLogReader`](openraft::RaftLogReader). Obtained from
/// [`LogStore::group`]; at most one per group is alive at a time.
pub struct GroupLogStore<C: RaftTypeConfig> {
    pub(crate) store: LogStore,
    pub(crate) shared: Arc<GroupShared<C>>,
}

impl<C> GroupLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone,
{
    /// Makes the writing handle of `shared`, if it has none.
    pub(crate) fn claim(store: LogStore, shared: Arc<GroupShared<C>>) -> Result<Self, Error> {
        if shared.claimed.swap(true, Ordering::AcqRel) {
            return Err(Error::GroupOpen {
                group_id: shared.group_id,
            });
        }
        Ok(GroupLogStore { store, shared })
    }

    /// The Raft group this handle writes.
    pub fn group_id(&self) -> u64 {
        self.shared.group_id
    }

    /// Number of appended entries not yet durable.
    pub fn tail_len(&self) -> usize {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tail
            .len()
    }
}

impl<C: RaftTypeConfig> Drop for GroupLogStore<C> {
    fn drop(&mut self) {
        self.shared.claimed.store(false, Ordering::Release);
    }
}

/// A reader of one group's log, for openraft's replication tasks. Cheap to
/// clone; sees the same in-memory tail as the group's [`GroupLogStore`].
pub struct GroupLogReader<C: RaftTypeConfig> {
    pub(crate) store: LogStore,
    pub(crate) shared: Arc<GroupShared<C>>,
}

impl<C: RaftTypeConfig> Clone for GroupLogReader<C> {
    fn clone(&self) -> Self {
        GroupLogReader {
            store: self.store.clone(),
            shared: self.shared.clone(),
        }
    }
}
