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
//! purged). A read returns, for each index of the logical log in its range,
//! the tail's entry if the tail has one (the newest write), else the disk's.
//! Truncate and purge update the logical log at once and the disk later (in
//! order, through the writer), so reads clamp to the logical log, skip disk
//! entries at or past a pending truncate, and never serve an entry that a
//! pending truncate or purge has removed. The read transaction is begun
//! under the group's lock, so it contains every entry already released from
//! the tail.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::alias::{LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::RaftTypeConfig;
use redb::{Database, ReadOnlyTable, ReadableDatabase};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::record;
use crate::store::LogStore;
use crate::tables::{MetaKind, RecordKey, COMMITTED_INDEX, ENTRIES, META};
use crate::tail::Tail;

/// The in-memory state of one group.
pub(crate) struct GroupState<C: RaftTypeConfig> {
    /// The last durable vote.
    pub(crate) vote: Option<VoteOf<C>>,
    /// The last committed log id handed to `save_committed`.
    pub(crate) committed: Option<LogIdOf<C>>,
    /// Its record, not yet queued for writing: it rides along with the
    /// group's next append, so it never costs an fsync of its own.
    pub(crate) committed_unwritten: Option<Vec<u8>>,
    /// The last purged log id (logical: possibly not yet durable).
    pub(crate) last_purged: Option<LogIdOf<C>>,
    /// The last log id of the logical log, or `last_purged` if the log is
    /// empty.
    pub(crate) last_log_id: Option<LogIdOf<C>>,
    /// Appended entries not yet durable.
    pub(crate) tail: Tail<C::Entry>,
    /// Sequence number of the next write request.
    pub(crate) next_write_seq: u64,
    /// A truncate sent to the writer and not yet durable: entries on disk
    /// at or past `since` are stale and must not be read.
    pub(crate) truncate_pending: Option<TruncatePending>,
}

/// See [`GroupState::truncate_pending`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct TruncatePending {
    /// The lowest `since` of the pending truncates.
    pub(crate) since: u64,
    /// The write sequence number of the latest pending truncate.
    pub(crate) write_seq: u64,
}

impl<C: RaftTypeConfig> GroupState<C> {
    /// The first index of the logical log.
    pub(crate) fn first_index(&self) -> u64 {
        self.last_purged.as_ref().map_or(0, |p| p.index + 1)
    }

    /// One past the last index of the logical log.
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
    let found = entry.log_id_parts().1;
    if found != index {
        return Err(Error::IndexMismatch {
            group_id,
            index,
            found,
        });
    }
    Ok(entry)
}

/// Appends to `out` the entries of `group_id` stored with index in
/// `start..end`, skipping (without decoding) the indexes `skip` returns
/// true for.
fn read_disk_entries<C>(
    entries: &EntriesTable,
    group_id: u64,
    start: u64,
    end: u64,
    mut skip: impl FnMut(u64) -> bool,
    out: &mut Vec<(u64, C::Entry)>,
) -> Result<(), Error>
where
    C: RaftTypeConfig,
    C::Entry: DeserializeOwned,
{
    if start >= end {
        return Ok(());
    }
    for row in entries.range((group_id, start)..(group_id, end))? {
        let (key, value) = row?;
        let (_, index) = key.value();
        if !skip(index) {
            out.push((index, decode_entry::<C>(group_id, index, value.value())?));
        }
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
        let vote = read_meta::<VoteOf<C>>(&meta, group_id, MetaKind::Vote)?;
        let last_purged = read_meta::<LogIdOf<C>>(&meta, group_id, MetaKind::LastPurged)?;
        let entries = txn.open_table(ENTRIES)?;
        let committed = match entries.get((group_id, COMMITTED_INDEX))? {
            Some(value) => record::decode::<Option<LogIdOf<C>>>(
                RecordKey::Meta {
                    group_id,
                    kind: Ok(MetaKind::Committed),
                },
                value.value(),
            )?,
            None => None,
        };
        let last_entry = match entries
            .range((group_id, 0)..(group_id, COMMITTED_INDEX))?
            .next_back()
        {
            Some(row) => {
                let (key, value) = row?;
                let (_, index) = key.value();
                Some(
                    decode_entry::<C>(group_id, index, value.value())?
                        .log_id()
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
                committed_unwritten: None,
                last_purged,
                last_log_id,
                tail: Tail::new(),
                next_write_seq: 0,
                truncate_pending: None,
            }),
        })
    }

    /// Locks the group's state. A poisoned lock is taken over: the state is
    /// only mutated by short sections that do not panic on their own.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GroupState<C>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entries with index in `start..end` that the logical log holds,
    /// in index order: the disk's, overlaid by the tail's.
    pub(crate) fn read_entries(
        &self,
        db: &Database,
        start: u64,
        end: u64,
    ) -> Result<Vec<C::Entry>, Error> {
        let (start, disk_end, tail_part, txn) = {
            let state = self.lock();
            let start = start.max(state.first_index());
            let end = end.min(state.next_index());
            if start >= end {
                return Ok(Vec::new());
            }
            let tail_part = state.tail.clone_range(start, end);
            // On disk, entries at or past a pending truncate are stale.
            let disk_end = state
                .truncate_pending
                .map_or(end, |pending| end.min(pending.since));
            let n_tail_below_disk_end =
                tail_part.iter().take_while(|(i, _)| *i < disk_end).count() as u64;
            let tail_covers_disk_range = n_tail_below_disk_end >= disk_end.saturating_sub(start);
            // Taken under the lock: the snapshot holds every entry released
            // from the tail so far, and nothing a pending truncate or purge
            // would hide is served past the clamps above.
            let txn = if start < disk_end && !tail_covers_disk_range {
                Some(db.begin_read()?)
            } else {
                None
            };
            (start, disk_end, tail_part, txn)
        };
        let Some(txn) = txn else {
            return Ok(tail_part.into_iter().map(|(_, e)| e).collect());
        };
        let entries = txn.open_table(ENTRIES)?;
        let mut disk_part = Vec::new();
        let mut tail_indexes = tail_part.iter().map(|(index, _)| *index).peekable();
        read_disk_entries::<C>(
            &entries,
            self.group_id,
            start,
            disk_end,
            |index| {
                while tail_indexes.next_if(|t| *t < index).is_some() {}
                tail_indexes.peek() == Some(&index)
            },
            &mut disk_part,
        )?;
        Ok(merge_by_index(disk_part, tail_part))
    }

    /// The log id of the highest-indexed durable entry in `start..end`.
    pub(crate) fn disk_last_log_id_in(
        &self,
        db: &Database,
        start: u64,
        end: u64,
    ) -> Result<Option<LogIdOf<C>>, Error> {
        if start >= end {
            return Ok(None);
        }
        let txn = db.begin_read()?;
        let entries = txn.open_table(ENTRIES)?;
        let last = entries
            .range((self.group_id, start)..(self.group_id, end))?
            .next_back();
        match last {
            Some(row) => {
                let (key, value) = row?;
                let (_, index) = key.value();
                let entry = decode_entry::<C>(self.group_id, index, value.value())?;
                Ok(Some(entry.log_id()))
            }
            None => Ok(None),
        }
    }
}

/// Merges two index-ordered runs with distinct indexes.
fn merge_by_index<E>(a: Vec<(u64, E)>, b: Vec<(u64, E)>) -> Vec<E> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some((ia, _)), Some((ib, _))) => ia < ib,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a.next() } else { b.next() };
        if let Some((_, e)) = next {
            out.push(e);
        }
    }
    out
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
