//! openraft's storage traits for [`GroupLogStore`] and [`GroupLogReader`]:
//! how each `RaftLogStorage` call maps onto the tail, the group state and
//! the writer.
//!
//! | call | in memory, before returning | writer request | returns |
//! |---|---|---|---|
//! | `append` | entries pushed to the tail (readable), last log id moved | `Append` | at once; `IOFlushed` runs after the fsync |
//! | `save_vote` | vote kept after the fsync | `PutMeta(Vote)` | after the fsync |
//! | `save_committed` | committed kept | rides in the `Append` request of the group's next append | at once (openraft allows losing it) |
//! | `truncate_after` | tail cut, last log id moved back | `Truncate` | after the fsync |
//! | `purge` | tail cut, last purged moved | `Purge` | after the fsync |
//!
//! All of a group's requests go through the writer in call order, so a
//! later durable request implies every earlier one of the group is durable.
//!
//! Cancel safety: each call first reserves a slot in the writer's queue (the
//! only await before its effects), then changes the group's state and
//! queues its request without awaiting. A future dropped at any await point
//! has therefore either changed nothing or queued everything.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};

use openraft::alias::{LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, RaftTypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::group::{GroupLogReader, GroupLogStore, GroupShared, TruncatePending};
use crate::record;
use crate::store::LogStore;
use crate::tables::{MetaKind, RecordKey};
use crate::writer::{Applied, Completion, WriteOp};

/// `range` as a half-open `start..end` of indexes.
fn index_bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

fn read_logs<C, RB>(
    store: &LogStore,
    shared: &GroupShared<C>,
    range: RB,
) -> Result<Vec<C::Entry>, Error>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
    RB: RangeBounds<u64>,
{
    let (start, end) = index_bounds(&range);
    shared.read_entries(&store.db(), start, end)
}

fn read_logs_error(e: Error) -> io::Error {
    e.into_io("reading the log")
}

impl<C> RaftLogReader<C> for GroupLogReader<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        read_logs(&self.store, &self.shared, range).map_err(read_logs_error)
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<C>>, io::Error> {
        Ok(self.shared.lock().vote.clone())
    }
}

impl<C> RaftLogReader<C> for GroupLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        read_logs(&self.store, &self.shared, range).map_err(read_logs_error)
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<C>>, io::Error> {
        Ok(self.shared.lock().vote.clone())
    }
}

fn write_logs_error(e: Error) -> io::Error {
    e.into_io("writing the log")
}

impl<C> GroupLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
{
    fn meta_key(&self, kind: MetaKind) -> RecordKey {
        RecordKey::Meta {
            group_id: self.shared.group_id,
            kind: Ok(kind),
        }
    }

    /// Frames `entries`, pushes them to the tail and returns the writer
    /// request and the append's write sequence number.
    fn stage_append(&self, entries: Vec<C::Entry>) -> Result<(WriteOp, u64), Error> {
        let group_id = self.shared.group_id;
        let mut records = Vec::with_capacity(entries.len());
        for entry in &entries {
            let index = entry.log_id_parts().1;
            records.push((
                index,
                record::encode(RecordKey::Entry { group_id, index }, entry)?,
            ));
        }
        let mut state = self.shared.lock();
        let write_seq = state.next_write_seq;
        state.next_write_seq += 1;
        for entry in entries {
            let log_id = entry.log_id();
            if state
                .last_log_id
                .as_ref()
                .is_none_or(|last| last.index <= log_id.index)
            {
                state.last_log_id = Some(log_id.clone());
            }
            state.tail.push(log_id.index, write_seq, entry);
        }
        Ok((
            WriteOp::Append {
                group_id,
                records,
                committed: None,
            },
            write_seq,
        ))
    }

    /// `append` with a plain completion instead of openraft's `IOFlushed`:
    /// the entries are readable when this returns, and `on_flushed` runs on
    /// the writer thread once they are durable (in the journal or the
    /// tables) or the write failed.
    pub(crate) async fn append_with(
        &mut self,
        entries: Vec<C::Entry>,
        on_flushed: Completion,
    ) -> Result<(), Error> {
        let permit = self.store.reserve().await?;
        let (mut op, write_seq) = self.stage_append(entries)?;
        // The committed log id saved since the last append rides in the same
        // request: one transaction, one fsync, never a commit of its own.
        if let WriteOp::Append { committed, .. } = &mut op {
            *committed = self.shared.lock().committed_unwritten.take();
        }
        let shared = self.shared.clone();
        // Once the entries are in the tables, reads find them there.
        let applied: Applied = Box::new(move || shared.lock().tail.release_through(write_seq));
        permit.send_append(op, applied, on_flushed);
        Ok(())
    }

    /// Cuts the logical log at `since`. Returns the write sequence number of
    /// the truncate to send, or `None` if the log has nothing at `since` or
    /// after.
    fn stage_truncate(&self, since: u64) -> Result<Option<u64>, Error> {
        let mut state = self.shared.lock();
        if since >= state.next_index() {
            return Ok(None);
        }
        let first = state.first_index();
        debug_assert!(since >= first, "openraft never truncates purged entries");
        // The new last log id: the highest entry left below `since`, from the
        // tail or the disk, else the last purged one.
        let in_tail = state.tail.last_before(since).map(|e| e.log_id());
        let disk_end = state
            .truncate_pending
            .map_or(since, |pending| since.min(pending.since));
        // Read under the lock so no purge or release can race it.
        let on_disk = self
            .shared
            .disk_last_log_id_in(&self.store.db(), first, disk_end)?;
        let new_last = match (in_tail, on_disk) {
            (Some(t), Some(d)) => Some(if t.index >= d.index { t } else { d }),
            (Some(t), None) => Some(t),
            (None, Some(d)) => Some(d),
            (None, None) => state.last_purged.clone(),
        };
        state.tail.truncate_from(since);
        state.last_log_id = new_last;
        let write_seq = state.next_write_seq;
        state.next_write_seq += 1;
        let pending_since = state
            .truncate_pending
            .map_or(since, |pending| since.min(pending.since));
        state.truncate_pending = Some(TruncatePending {
            since: pending_since,
            write_seq,
        });
        Ok(Some(write_seq))
    }

    /// Moves the logical log's start past `log_id`; returns whether the
    /// disk must follow.
    fn stage_purge(&self, log_id: &LogIdOf<C>) -> bool {
        let mut state = self.shared.lock();
        if state
            .last_purged
            .as_ref()
            .is_some_and(|p| p.index >= log_id.index)
        {
            return false;
        }
        state.tail.purge_through(log_id.index);
        if state
            .last_log_id
            .as_ref()
            .is_none_or(|l| l.index < log_id.index)
        {
            state.last_log_id = Some(log_id.clone());
        }
        state.last_purged = Some(log_id.clone());
        true
    }
}

impl<C> RaftLogStorage<C> for GroupLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Clone + Serialize + DeserializeOwned,
{
    type LogReader = GroupLogReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        let state = self.shared.lock();
        Ok(LogState {
            last_purged_log_id: state.last_purged.clone(),
            last_log_id: state.last_log_id.clone(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        GroupLogReader {
            store: self.store.clone(),
            shared: self.shared.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &VoteOf<C>) -> Result<(), io::Error> {
        let write_vote_error = |e: Error| e.into_io("writing the vote");
        let record =
            record::encode(self.meta_key(MetaKind::Vote), vote).map_err(write_vote_error)?;
        let op = WriteOp::PutMeta {
            group_id: self.shared.group_id,
            kind: MetaKind::Vote,
            record,
        };
        let shared = self.shared.clone();
        let vote = vote.clone();
        // Set on the writer thread after the commit, so the group's state
        // matches the disk even if this future is dropped meanwhile.
        let on_durable = move || shared.lock().vote = Some(vote);
        self.store
            .submit_and_wait(op, on_durable)
            .await
            .map_err(write_vote_error)
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        let record = record::encode(self.meta_key(MetaKind::Committed), &committed)
            .map_err(write_logs_error)?;
        // Not written now: openraft allows losing it, and a write of its own
        // would cost every commit a second fsync (an idle group's last
        // committed id is simply re-derived after a restart). It is written
        // with the group's next append.
        let mut state = self.shared.lock();
        state.committed = committed;
        state.committed_unwritten = Some(record);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<C>>, io::Error> {
        Ok(self.shared.lock().committed.clone())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let on_flushed: Completion = Box::new(move |result| match result {
            Ok(()) => callback.io_completed(Ok(())),
            Err(e) => callback.io_completed(Err(io::Error::other(e))),
        });
        self.append_with(entries.into_iter().collect(), on_flushed)
            .await
            .map_err(write_logs_error)
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        // openraft 0.10 names the last entry to keep; the writer cuts from
        // the first one to drop.
        let since = last_log_id.map_or(0, |l| l.index + 1);
        let permit = self.store.reserve().await.map_err(write_logs_error)?;
        let Some(write_seq) = self.stage_truncate(since).map_err(write_logs_error)? else {
            return Ok(());
        };
        let op = WriteOp::Truncate {
            group_id: self.shared.group_id,
            since,
        };
        let shared = self.shared.clone();
        // Runs on the writer thread after the commit, even if this future is
        // dropped meanwhile.
        let on_durable = move || {
            let mut state = shared.lock();
            if state
                .truncate_pending
                .is_some_and(|pending| pending.write_seq == write_seq)
            {
                state.truncate_pending = None;
            }
        };
        permit
            .send_and_wait(op, on_durable)
            .await
            .map_err(write_logs_error)
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> Result<(), io::Error> {
        let record = record::encode(self.meta_key(MetaKind::LastPurged), &log_id)
            .map_err(write_logs_error)?;
        let permit = self.store.reserve().await.map_err(write_logs_error)?;
        if !self.stage_purge(&log_id) {
            return Ok(());
        }
        let op = WriteOp::Purge {
            group_id: self.shared.group_id,
            through: log_id.index,
            record,
        };
        let shared = self.shared.clone();
        permit
            .send_and_wait(op, move || drop(shared))
            .await
            .map_err(write_logs_error)
    }
}
