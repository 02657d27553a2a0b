//! openraft's state machine for a quorum queue: applies enqueues and
//! settlements to the replicated [`MessageIndex`] (bodies kept in memory
//! within the resident budget, paged into this replica's segment files
//! past it), feeds the leader's dispatcher as entries commit, and builds,
//! serves and installs snapshots.
//!
//! A snapshot names segment locations, so it is O(messages) in a few bytes
//! each, not O(bytes): the segments it names are fsynced before it is
//! written, and openraft purges the log only after it returned. A follower
//! behind the purge gets the bodies themselves, streamed from a file
//! (`snapshot_transfer`, `snapshot_data`), and pages them into a new
//! segment generation that one rename of its snapshot file swaps in.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use futures_util::{Stream, StreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder, StoredMembership};

use super::budget::NodeBudget;
use super::compaction::{LogGrowth, SnapshotWanted, ENTRY_OVERHEAD_BYTES};
use super::feed::Feed;
use super::index::{MessageIndex, Placement};
use super::replica_files::{self, SNAPSHOT_FILE};
use super::snapshot_data::{SnapshotData, Staging};
use super::types::{message_id, Applied, Command, QueueRaft};
use super::{snapshot_file, snapshot_install, snapshot_transfer};
use crate::crash_point;
use crate::latency::LatencyHistogram;
use crate::lock_order::{OrderedGuard, OrderedMutex, Rank};
use crate::paging::{SegmentStore, StoreOptions};
use crate::queue::dead_letter::SharedRouter;
use crate::queue::dispatch::Dispatcher;
use crate::queue::ConsumerId;
use crate::raft::{SnapshotCover, SnapshotReceiver};

/// State shared by the state machine (apply) and the queue (consumers).
#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) index: MessageIndex,
    /// This replica's segment files (none only before `open`).
    pub(crate) store: Option<SegmentStore>,
    /// The segment directory generation the store lives in.
    pub(crate) generation: u64,
    pub(crate) last_applied: Option<LogIdOf<QueueRaft>>,
    pub(crate) membership: StoredMembershipOf<QueueRaft>,
    /// Whether this node leads the group: only then is `dispatcher` used.
    pub(crate) leading: bool,
    pub(crate) dispatcher: Dispatcher,
    /// Which part of the index the leader's dispatcher has seen.
    pub(crate) feed: Feed,
    /// Consumers of routed links (see `QuorumQueue::subscribe_routed`):
    /// when this node stops leading they are not closed but parked in
    /// `orphans` for their routed queue to move to the new leader.
    pub(crate) routed: HashSet<ConsumerId>,
    /// Parked routed consumers: delivery-count and credit limit.
    pub(crate) orphans: HashMap<ConsumerId, (u32, u32)>,
    /// Snapshots built so far by this node (for unique transfer file
    /// names).
    n_snapshots: u64,
    /// Log bytes applied since the last snapshot (see `compaction`).
    pub(super) growth: LogGrowth,
    /// The queue was deleted (`removal.rs`): it serves nothing more.
    pub(crate) deleted: bool,
    /// Its place on the node's sweep list (`sweep_list.rs`).
    pub(crate) sweep: super::sweep_list::SweepMark,
    /// Messages this replica applied into the queue since it opened (for
    /// metrics; a restart counts again from 0).
    pub(crate) published_total: u64,
    /// Publishers waiting for room under the policy's reject-publish
    /// limit (`length_limit.rs`).
    pub(crate) room_waiters: Vec<(crate::queue::Sink, u64)>,
}

impl Inner {
    /// The meta of a snapshot of the state now (openraft 0.10's meta has
    /// no snapshot id; `n_snapshots` still numbers this node's snapshots).
    fn next_snapshot_meta(&mut self) -> SnapshotMetaOf<QueueRaft> {
        self.n_snapshots += 1;
        SnapshotMetaOf::<QueueRaft> {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
        }
    }

    /// Whether segment files are involved in what a restart would replay:
    /// bodies were paged since the last snapshot (a replay pages them
    /// again), or segment files exist (the last snapshot may name records
    /// in them that were settled since). See `stop_snapshot.rs`.
    pub(super) fn segments_in_replay(&self) -> bool {
        self.growth.paged_since_snapshot()
            || self
                .store
                .as_ref()
                .is_some_and(|s| s.stats().n_segments > 0)
    }
}

/// How one queue's replica keeps bodies.
#[derive(Debug, Clone)]
pub(crate) struct BodyLimits {
    /// Bytes of resident bodies across the node.
    pub(crate) node: Arc<NodeBudget>,
    /// Bytes of resident bodies in this queue at most.
    pub(crate) queue_bytes: u64,
    /// The segment files' limits.
    pub(crate) store: StoreOptions,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            node: Arc::new(NodeBudget::new(64 * 1024 * 1024)),
            queue_bytes: 16 * 1024 * 1024,
            store: StoreOptions::default(),
        }
    }
}

/// The lock around [`Inner`]; held only for short, non-async steps.
pub(crate) struct Shared {
    inner: OrderedMutex<Inner>,
    /// Log bytes after which the state machine asks for a snapshot even if
    /// openraft's entry count has not come round (0: never by size).
    snapshot_floor_bytes: u64,
    pub(crate) limits: BodyLimits,
    /// Raised by the state machine, served by the queue's watcher task.
    pub(crate) snapshot_wanted: SnapshotWanted,
    /// The queue's address, for logs.
    pub(crate) queue: String,
    /// What the durable snapshot file covers: the group's log purge waits
    /// for it (`raft::PurgeGatedLog`).
    pub(crate) snapshot_cover: SnapshotCover,
    /// Times this node saw the group's leader change (for metrics; counted
    /// by the leadership watcher, `leadership_watch.rs`).
    pub(crate) leader_changes: AtomicU64,
    /// The node's histogram of publish commit latency (proposal to
    /// commit), shared by every queue of the node.
    pub(crate) commit_latency: Arc<LatencyHistogram>,
    /// The node's sweep list and this group's id on it (`sweep_list.rs`):
    /// joined when the leader may have something to discard; its "sweep
    /// now" is raised when the leader applied past its drop-head limit, so
    /// the head goes at once rather than at the next tick.
    pub(crate) sweep_list: super::sweep_list::SweepSlot,
    /// The node's record of a group whose core quit (`node_faults.rs`).
    pub(crate) core_faults: std::sync::OnceLock<Arc<super::node_faults::CoreFaults>>,
    /// Wakes the dead-letter sender (`dead_letter_outbox.rs`).
    pub(crate) dead_letter_wake: tokio::sync::Notify,
    /// Publishes dead-lettered copies; the node's, set once `node/` made it.
    pub(crate) dead_letter_router: Arc<OnceLock<SharedRouter>>,
    /// A snapshot the leader is streaming here (`raft::snapshot_stream`).
    pub(crate) snapshot_in: SnapshotReceiver<Staging>,
    /// Whether the group is quiet here (`quiet.rs`).
    pub(crate) quiet: Arc<super::quiet::Quiet>,
    /// Requests to other nodes; the node's, set once `node/` made them.
    pub(crate) peers: Arc<OnceLock<Arc<dyn super::PeerRequests>>>,
    /// Raised (`notify_one`: kept until awaited) when this replica starts
    /// or stops serving as leader; its one waiter is the forwarding's.
    pub(crate) leading_flips: Arc<tokio::sync::Notify>,
}

impl Shared {
    pub(crate) fn new(
        snapshot_floor_bytes: u64,
        limits: BodyLimits,
        queue: String,
        commit_latency: Arc<LatencyHistogram>,
    ) -> Shared {
        Shared {
            inner: OrderedMutex::new(Rank::QuorumQueue, Inner::default()),
            snapshot_floor_bytes,
            limits,
            snapshot_wanted: SnapshotWanted::default(),
            queue,
            snapshot_cover: SnapshotCover::default(),
            leader_changes: AtomicU64::new(0),
            commit_latency,
            sweep_list: std::sync::OnceLock::new(),
            core_faults: std::sync::OnceLock::new(),
            dead_letter_wake: tokio::sync::Notify::new(),
            dead_letter_router: Arc::default(),
            snapshot_in: SnapshotReceiver::default(),
            quiet: Arc::default(),
            peers: Arc::default(),
            leading_flips: Arc::default(),
        }
    }

    pub(crate) fn lock(&self) -> OrderedGuard<'_, Inner> {
        self.inner.lock()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let resident = self.inner.lock().index.resident_bytes();
        self.limits.node.give_back(resident);
    }
}

/// A sealed segment under this share of live bytes is compacted.
const COMPACT_LIVE_PERCENT: u32 = 50;
/// Live bytes copied by compaction per snapshot at most.
const COMPACT_BYTES_PER_SNAPSHOT: u64 = 8 * 1024 * 1024;

/// The state machine of one group.
#[derive(Clone)]
pub(crate) struct QueueStateMachine {
    shared: Arc<Shared>,
    dir: PathBuf,
}

/// A quorum snapshot's meta and bytes.
pub(crate) type QueueSnapshot = SnapshotOf<QueueRaft, SnapshotData>;

/// What openraft 0.10's state machine calls return on failure: an
/// `io::Error` saying what failed (openraft stops the group on it).
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub(crate) struct StateMachineError {
    doing: &'static str,
    source: Box<dyn std::error::Error + Send + Sync>,
}

fn failed(
    doing: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> std::io::Error {
    std::io::Error::other(StateMachineError {
        doing,
        source: Box::new(e),
    })
}

pub(super) fn io_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    failed("writing a snapshot", e)
}

pub(super) fn read_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    failed("reading a snapshot", e)
}

fn apply_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    failed("applying the log", e)
}

impl QueueStateMachine {
    /// The state machine of a group whose files live in `dir`, restored
    /// from its snapshot file and segments if there are any. Reads the
    /// index, not the bodies.
    pub(crate) fn open(
        dir: &Path,
        shared: Arc<Shared>,
    ) -> Result<QueueStateMachine, std::io::Error> {
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let restored = match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(file) => Some(snapshot_file::read(&file).map_err(read_error)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(read_error(e)),
        };
        let generation = restored.as_ref().map_or(0, |r| r.generation);
        replica_files::remove_stale(dir, generation).map_err(read_error)?;
        let mut store = SegmentStore::open(
            replica_files::segments_dir(dir, generation),
            shared.limits.store,
        )
        .map_err(read_error)?;
        let mut inner = shared.lock();
        if let Some(restored) = restored {
            let mut index = restored.index;
            let paged = index
                .iter()
                .filter(|s| s.placement == Placement::Paged)
                .map(|s| s.location);
            let outcome = store.restore_live(paged).map_err(read_error)?;
            if !outcome.missing.is_empty() {
                // Segments emptied by settlements after this snapshot: the
                // log replay settles these again (see `paging`).
                let missing: HashSet<(u32, u32)> = outcome
                    .missing
                    .iter()
                    .map(|l| (l.segment, l.ordinal))
                    .collect();
                let ids: Vec<u64> = index
                    .iter()
                    .filter(|s| missing.contains(&(s.location.segment, s.location.ordinal)))
                    .map(|s| s.id)
                    .collect();
                for id in ids {
                    index.set_missing(id);
                }
            }
            shared.limits.node.take(index.resident_bytes());
            inner.index = index;
            inner.last_applied = restored.meta.last_log_id;
            shared
                .snapshot_cover
                .recorded(restored.meta.last_log_id.map(|l| l.index));
            inner.membership = restored.meta.last_membership;
            // The dead-letter sender sleeps while its outbox is empty.
            shared.dead_letter_wake.notify_one();
        } else {
            store.restore_live([]).map_err(read_error)?;
        }
        inner.store = Some(store);
        inner.generation = generation;
        drop(inner);
        Ok(QueueStateMachine {
            shared,
            dir: dir.to_path_buf(),
        })
    }

    /// A snapshot of the state now, whose bytes (every live body) are
    /// written to a file only when openraft first reads them.
    fn transfer_snapshot(&self) -> Result<QueueSnapshot, std::io::Error> {
        let mut inner = self.shared.lock();
        let meta = inner.next_snapshot_meta();
        let n = inner.n_snapshots;
        let index = inner.index.clone();
        let reader = match inner.store.as_mut() {
            Some(store) => store.reader().map_err(read_error)?,
            None => return Err(read_error(snapshot_install::NotOpen)),
        };
        drop(inner);
        let dir = self.dir.clone();
        let data = SnapshotData::lazy(move || {
            use std::io::{Seek, Write};
            let file = replica_files::anonymous_file(&dir, n)?;
            let mut out = std::io::BufWriter::with_capacity(256 * 1024, &file);
            snapshot_transfer::write(&mut out, &index, &reader).map_err(std::io::Error::other)?;
            out.flush()?;
            drop(out);
            let mut file = file;
            file.seek(std::io::SeekFrom::Start(0))?;
            Ok(file)
        });
        Ok(QueueSnapshot {
            meta,
            snapshot: data,
        })
    }
}

impl RaftSnapshotBuilder<QueueRaft> for QueueStateMachine {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<QueueSnapshot, std::io::Error> {
        // O(1) under the lock (the index is persistent; segment buffers are
        // written, their fsyncs collected); the rest runs without it.
        let (index, meta, generation, pending) = {
            let mut inner = self.shared.lock();
            inner.growth.snapshotted();
            let meta = inner.next_snapshot_meta();
            let Some(store) = inner.store.as_mut() else {
                return Err(io_error(snapshot_install::NotOpen));
            };
            // Reclaim sparse segments a bounded amount at a time (this
            // holds the lock); the snapshot records the moves and only
            // then are the old files deleted (below).
            let compaction = store
                .compact_bounded(COMPACT_LIVE_PERCENT, COMPACT_BYTES_PER_SNAPSHOT)
                .map_err(io_error)?;
            let pending = store.sync_later().map_err(io_error)?;
            for moved in compaction.moves {
                inner.index.relocate(moved.id, moved.from, moved.to);
            }
            (inner.index.clone(), meta, inner.generation, pending)
        };
        let dir = self.dir.clone();
        let file_meta = meta.clone();
        tokio::task::spawn_blocking(move || {
            // The segments the snapshot names are durable before it is.
            pending.run().map_err(io_error)?;
            crash_point::reached(crash_point::SNAPSHOT_SEGMENTS_SYNCED);
            replica_files::write_durably(&dir, SNAPSHOT_FILE, |out| {
                snapshot_file::write(out, &file_meta, generation, &index)
            })
            .map_err(io_error)
        })
        .await
        .map_err(io_error)??;
        self.shared
            .snapshot_cover
            .recorded(meta.last_log_id.map(|l| l.index));
        // openraft purges the log only after this returns.
        crash_point::reached(crash_point::SNAPSHOT_RECORDED);
        // Compacted segments may go once a snapshot names their successors.
        if let Some(store) = self.shared.lock().store.as_mut() {
            store.delete_retired().map_err(io_error)?;
        }
        // openraft keeps only the meta of what this returns; the bytes a
        // follower needs come from `get_current_snapshot`.
        Ok(QueueSnapshot {
            meta,
            snapshot: SnapshotData::lazy(|| {
                Err(std::io::Error::other("a built snapshot is not streamed"))
            }),
        })
    }
}

impl RaftStateMachine<QueueRaft> for QueueStateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<QueueRaft>>, StoredMembershipOf<QueueRaft>), std::io::Error> {
        let inner = self.shared.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<S>(&mut self, mut stream: S) -> Result<(), std::io::Error>
    where
        S: Stream<Item = Result<EntryResponder<QueueRaft>, std::io::Error>> + Unpin + Send,
    {
        // The entries come as a stream; they are taken off it first so the
        // queue's lock is never held across an await, then applied under
        // one lock as a batch.
        let mut entries = Vec::new();
        let mut responders = Vec::new();
        while let Some(item) = stream.next().await {
            let (entry, responder) = item?;
            entries.push(entry);
            if let Some(responder) = responder {
                responders.push(responder);
            }
        }
        self.apply_batch(entries)?;
        for responder in responders {
            responder.send(Applied);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<QueueRaft>,
        snapshot: SnapshotData,
    ) -> Result<(), std::io::Error> {
        // Boxed: rare; inline, its ~700-byte future sized every replica's state-machine task.
        let install = snapshot_install::install(&self.shared, &self.dir, meta, snapshot);
        Box::pin(install).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<QueueSnapshot>, std::io::Error> {
        // Before the first snapshot there is nothing to send (the log
        // still holds every entry); after it, the state now serves as well
        // as the one recorded, and its segments are all still readable.
        match tokio::fs::try_exists(self.dir.join(SNAPSHOT_FILE)).await {
            Ok(true) => self.transfer_snapshot().map(Some),
            Ok(false) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }
}

impl QueueStateMachine {
    /// Applies `entries` in order under one lock.
    fn apply_batch(
        &mut self,
        entries: Vec<openraft::alias::EntryOf<QueueRaft>>,
    ) -> Result<(), std::io::Error> {
        let shared = &self.shared;
        let mut inner = shared.lock();
        let mut log_bytes = 0u64;
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            log_bytes += ENTRY_OVERHEAD_BYTES;
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(Command::Enqueue { messages }) => {
                    log_bytes += messages.iter().map(|m| m.len() as u64).sum::<u64>();
                    for (position, message) in messages.into_iter().enumerate() {
                        let id = message_id(entry.log_id.index, position);
                        inner
                            .enqueue(&shared.limits, id, message)
                            .map_err(apply_error)?;
                    }
                }
                EntryPayload::Normal(Command::Settle { ids, kind }) => {
                    log_bytes += 8 * ids.len() as u64;
                    for id in ids {
                        inner
                            .settle(&shared.limits, id, kind)
                            .map_err(apply_error)?;
                    }
                }
                EntryPayload::Normal(Command::Transact { messages, settles }) => {
                    log_bytes += messages.iter().map(|m| m.len() as u64).sum::<u64>();
                    log_bytes += 9 * settles.len() as u64;
                    for (position, message) in messages.into_iter().enumerate() {
                        let id = message_id(entry.log_id.index, position);
                        inner
                            .enqueue(&shared.limits, id, message)
                            .map_err(apply_error)?;
                    }
                    for (id, kind) in settles {
                        inner
                            .settle(&shared.limits, id, kind)
                            .map_err(apply_error)?;
                    }
                }
                EntryPayload::Normal(Command::EnqueueExpiring {
                    messages,
                    expires_at,
                }) => {
                    log_bytes += messages.iter().map(|m| m.len() as u64).sum::<u64>();
                    log_bytes += 8 * expires_at.len() as u64;
                    for (position, message) in messages.into_iter().enumerate() {
                        let id = message_id(entry.log_id.index, position);
                        let at = expires_at.get(position).copied().unwrap_or(0);
                        inner
                            .enqueue_expiring(&shared.limits, id, message, at)
                            .map_err(apply_error)?;
                    }
                }
                EntryPayload::Normal(Command::TransactExpiring {
                    messages,
                    settles,
                    expires_at,
                }) => {
                    log_bytes += messages.iter().map(|m| m.len() as u64).sum::<u64>();
                    log_bytes += 9 * settles.len() as u64 + 8 * expires_at.len() as u64;
                    for (position, message) in messages.into_iter().enumerate() {
                        let id = message_id(entry.log_id.index, position);
                        let at = expires_at.get(position).copied().unwrap_or(0);
                        inner
                            .enqueue_expiring(&shared.limits, id, message, at)
                            .map_err(apply_error)?;
                    }
                    for (id, kind) in settles {
                        inner
                            .settle(&shared.limits, id, kind)
                            .map_err(apply_error)?;
                    }
                }
                EntryPayload::Normal(Command::Discard { ids, reason }) => {
                    log_bytes += 8 * ids.len() as u64;
                    inner
                        .discard(&shared.limits, &ids, reason)
                        .map_err(apply_error)?;
                }
                EntryPayload::Normal(Command::DeadLetter { ids, salt }) => {
                    log_bytes += 9 * ids.len() as u64;
                    if inner.dead_letter(&ids, salt) {
                        shared.dead_letter_wake.notify_one();
                    }
                }
                EntryPayload::Normal(Command::DeadLettered { ids }) => {
                    log_bytes += 8 * ids.len() as u64;
                    inner
                        .dead_lettered(&shared.limits, &ids)
                        .map_err(apply_error)?;
                }
                EntryPayload::Normal(Command::Purge { upto, except }) => {
                    log_bytes += 8 * except.len() as u64;
                    inner
                        .purge(&shared.limits, upto, &except)
                        .map_err(apply_error)?;
                }
                EntryPayload::Membership(membership) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
        }
        inner.refill(&shared.queue);
        inner.wake_room_waiters();
        super::sweep_list::list_if_wanted(shared, &mut inner);
        if inner.leading && inner.past_drop_head_limit() {
            if let Some((list, _)) = shared.sweep_list.get() {
                list.soon().notify_one();
            }
        }
        let resident_bytes = inner.index.resident_bytes();
        if inner
            .growth
            .applied(log_bytes, resident_bytes, shared.snapshot_floor_bytes)
        {
            tracing::debug!(
                log_bytes = inner.growth.since_snapshot(),
                resident_bytes,
                live_bytes = inner.index.bytes(),
                "quorum queue: log grew past its snapshot threshold"
            );
            shared.snapshot_wanted.signal();
        }
        Ok(())
    }
}
