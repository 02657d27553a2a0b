//! A group's log store whose purge waits until the state machine holds a
//! durable snapshot covering what is purged.
//!
//! Why: when a follower installs a snapshot streamed from its leader,
//! openraft 0.9 hands the install to the state machine's worker and issues
//! the log purge right after, without waiting for it. A crash between the
//! two leaves a log purged past everything the state machine has: at the
//! next start openraft finds `purge_upto > committed` and its core panics,
//! and the replica never serves again (found by the crash test at the
//! `install-staged` point). Holding the purge until the snapshot is on
//! disk keeps the order the disk needs. A leader's or follower's own
//! snapshot is durable before openraft purges after it, so those purges
//! never wait.
//!
//! If the snapshot never comes (its install failed), the purge gives up
//! after [`PURGE_WAIT`] with a storage error: the group's core stops, and
//! the node fail-stops like on any other storage error.
//!
//! This knows nothing of what a group replicates: only a log store and a
//! watched index.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::time::Duration;

use std::io;

use openraft::alias::{LogIdOf, VoteOf};
use openraft::rt::watch::{Watch, WatchReceiver, WatchSender};
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, RaftTypeConfig};

use super::lean_watch::{LeanWatch, LeanWatchReceiver, LeanWatchSender};

/// Longest a purge waits for the snapshot that covers it.
pub(crate) const PURGE_WAIT: Duration = Duration::from_secs(60);

/// One past the last log index a durable snapshot of the group's state
/// machine covers (0: no snapshot), published by the state machine. Our
/// lean watch, not tokio's: every group holds one, and tokio's shared
/// state (eight `Notify`s) was ~350 bytes of each idle group.
pub(crate) type SnapshotIndex = LeanWatchReceiver<u64>;

/// The state machine's side of the gate: it records each snapshot file
/// once that file is durable.
pub(crate) struct SnapshotCover(LeanWatchSender<u64>);

impl Debug for SnapshotCover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let covers = *self.0.borrow_watched();
        f.debug_tuple("SnapshotCover").field(&covers).finish()
    }
}

impl Default for SnapshotCover {
    fn default() -> Self {
        // The first receiver goes: `send_if_modified` publishes with none.
        let (sender, _) = LeanWatch::channel(0);
        SnapshotCover(sender)
    }
}

impl SnapshotCover {
    /// A snapshot file covering the log through `last` is durable.
    pub(crate) fn recorded(&self, last_index: Option<u64>) {
        let covers = last_index.map_or(0, |index| index.saturating_add(1));
        self.0.send_if_modified(|now| {
            let newer = covers > *now;
            if newer {
                *now = covers;
            }
            newer
        });
    }

    /// What the group's [`PurgeGatedLog`] waits on.
    pub(crate) fn subscribe(&self) -> SnapshotIndex {
        self.0.subscribe()
    }
}

/// `L`, with [`RaftLogStorage::purge`] held back as the module docs say.
pub(crate) struct PurgeGatedLog<L> {
    inner: L,
    snapshot: SnapshotIndex,
}

impl<L> PurgeGatedLog<L> {
    pub(crate) fn new(inner: L, snapshot: SnapshotIndex) -> Self {
        PurgeGatedLog { inner, snapshot }
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "no durable snapshot covered the log below {wanted} within {waited:?} (covered below {have})"
)]
struct SnapshotNeverCame {
    wanted: u64,
    have: u64,
    waited: Duration,
}

impl<C, L> RaftLogReader<C> for PurgeGatedLog<L>
where
    C: RaftTypeConfig,
    L: RaftLogReader<C>,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        self.inner.try_get_log_entries(range).await
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<C>>, io::Error> {
        self.inner.read_vote().await
    }
}

impl<C, L> RaftLogStorage<C> for PurgeGatedLog<L>
where
    C: RaftTypeConfig,
    L: RaftLogStorage<C>,
{
    type LogReader = L::LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        self.inner.get_log_state().await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.inner.get_log_reader().await
    }

    async fn save_vote(&mut self, vote: &VoteOf<C>) -> Result<(), io::Error> {
        self.inner.save_vote(vote).await
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        self.inner.save_committed(committed).await
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<C>>, io::Error> {
        self.inner.read_committed().await
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.inner.append(entries, callback).await
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        self.inner.truncate_after(last_log_id).await
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> Result<(), io::Error> {
        let wanted = log_id.index().saturating_add(1);
        let covered = tokio::time::timeout(PURGE_WAIT, covers(&mut self.snapshot, wanted))
            .await
            .unwrap_or(false);
        if !covered {
            let error = SnapshotNeverCame {
                wanted,
                have: *self.snapshot.borrow_watched(),
                waited: PURGE_WAIT,
            };
            return Err(io::Error::other(error));
        }
        self.inner.purge(log_id).await
    }
}

/// Waits until `index` reaches `wanted`: true, or false once the state
/// machine is gone without getting there.
async fn covers(index: &mut SnapshotIndex, wanted: u64) -> bool {
    loop {
        // Marked seen before the check: `changed` then waits for a newer
        // value only.
        let have = *index.borrow_and_update();
        if have >= wanted {
            return true;
        }
        if index.changed().await.is_err() {
            let have = *index.borrow_watched();
            return have >= wanted;
        }
    }
}
