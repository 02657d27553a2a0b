//! openraft's state machine for a quorum queue: applies enqueues and
//! settlements to the replicated [`MessageIndex`], feeds the leader's
//! dispatcher as entries commit, and builds, stores and installs snapshots
//! (from an O(1) clone of the index, encoded off the apply path).

// openraft's StorageError is large; it is openraft's type to return.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, HashSet};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};

use super::compaction::{LogGrowth, SnapshotWanted, ENTRY_OVERHEAD_BYTES};
use super::index::MessageIndex;
use super::types::{message_id, Applied, Command, QueueRaft, SettleKind};
use crate::lock_order::{OrderedGuard, OrderedMutex, Rank};
use crate::net::NodeId;
use crate::queue::dispatch::{Dispatcher, Entry as QueueEntry};
use crate::queue::ConsumerId;

/// State shared by the state machine (apply) and the queue (consumers).
#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) index: MessageIndex,
    pub(crate) last_applied: Option<LogId<NodeId>>,
    pub(crate) membership: StoredMembership<NodeId, BasicNode>,
    /// Whether this node leads the group: only then is `dispatcher` used.
    pub(crate) leading: bool,
    pub(crate) dispatcher: Dispatcher,
    /// Consumers of routed links (see `QuorumQueue::subscribe_routed`):
    /// when this node stops leading they are not closed but parked in
    /// `orphans` for their routed queue to move to the new leader.
    pub(crate) routed: HashSet<ConsumerId>,
    /// Parked routed consumers: delivery-count and credit limit.
    pub(crate) orphans: HashMap<ConsumerId, (u32, u32)>,
    /// Snapshots built so far by this node (for unique snapshot ids).
    n_snapshots: u64,
    /// Log bytes applied since the last snapshot (see `compaction`).
    growth: LogGrowth,
}

/// The lock around [`Inner`]; held only for short, non-async steps.
pub(crate) struct Shared {
    inner: OrderedMutex<Inner>,
    /// Log bytes after which the state machine asks for a snapshot even if
    /// openraft's entry count has not come round (0: never by size).
    snapshot_floor_bytes: u64,
    /// Raised by the state machine, served by the queue's watcher task.
    pub(crate) snapshot_wanted: SnapshotWanted,
}

impl Shared {
    pub(crate) fn new(snapshot_floor_bytes: u64) -> Shared {
        Shared {
            inner: OrderedMutex::new(Rank::QuorumQueue, Inner::default()),
            snapshot_floor_bytes,
            snapshot_wanted: SnapshotWanted::default(),
        }
    }

    pub(crate) fn lock(&self) -> OrderedGuard<'_, Inner> {
        self.inner.lock()
    }
}

type Meta = SnapshotMeta<NodeId, BasicNode>;

/// File holding the latest snapshot of a group.
const SNAPSHOT_FILE: &str = "snapshot.bin";

/// The state machine of one group.
#[derive(Clone)]
pub(crate) struct QueueStateMachine {
    shared: Arc<Shared>,
    dir: PathBuf,
}

fn io_error(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

fn read_error(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::read_snapshot(None, AnyError::new(&e)).into()
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Corrupt(String);

/// A snapshot file: postcard meta length (u32 LE), meta, index data.
fn encode_file(
    meta: &SnapshotMeta<NodeId, BasicNode>,
    data: &[u8],
) -> Result<Vec<u8>, StorageError<NodeId>> {
    let meta_bytes = postcard::to_allocvec(meta).map_err(io_error)?;
    let mut file = Vec::with_capacity(4 + meta_bytes.len() + data.len());
    file.extend_from_slice(&(meta_bytes.len() as u32).to_le_bytes());
    file.extend_from_slice(&meta_bytes);
    file.extend_from_slice(data);
    Ok(file)
}

fn decode_file(file: &[u8]) -> Result<(Meta, &[u8]), StorageError<NodeId>> {
    let corrupt = || read_error(Corrupt("snapshot file truncated".into()));
    let len_bytes: [u8; 4] = file
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(corrupt)?;
    let meta_len = u32::from_le_bytes(len_bytes) as usize;
    let meta_bytes = file.get(4..4 + meta_len).ok_or_else(corrupt)?;
    let meta = postcard::from_bytes(meta_bytes).map_err(read_error)?;
    Ok((meta, &file[4 + meta_len..]))
}

/// Write `contents` to `dir/name` atomically and durably.
fn write_durably(dir: &Path, name: &str, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

impl QueueStateMachine {
    /// The state machine of a group whose files live in `dir`, restored
    /// from its snapshot file if there is one.
    pub(crate) fn open(
        dir: &Path,
        shared: Arc<Shared>,
    ) -> Result<QueueStateMachine, StorageError<NodeId>> {
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let machine = QueueStateMachine {
            shared,
            dir: dir.to_path_buf(),
        };
        match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(file) => {
                let (meta, data) = decode_file(&file)?;
                let index = MessageIndex::decode(data).map_err(read_error)?;
                let mut inner = machine.shared.lock();
                inner.index = index;
                inner.last_applied = meta.last_log_id;
                inner.membership = meta.last_membership;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(read_error(e)),
        }
        Ok(machine)
    }
}

impl RaftSnapshotBuilder<QueueRaft> for QueueStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<QueueRaft>, StorageError<NodeId>> {
        // O(1) under the lock; the encoding below runs without it.
        let (index, meta) = {
            let mut inner = self.shared.lock();
            inner.n_snapshots += 1;
            inner.growth.snapshotted();
            let meta = SnapshotMeta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
                snapshot_id: format!(
                    "{}-{}",
                    inner.last_applied.map_or(0, |l| l.index),
                    inner.n_snapshots
                ),
            };
            (inner.index.clone(), meta)
        };
        // Encoding a deep queue takes a while: off the tokio workers, with
        // the file write.
        let dir = self.dir.clone();
        let file_meta = meta.clone();
        let data = tokio::task::spawn_blocking(move || {
            let data = index.encode();
            let file = encode_file(&file_meta, &data)?;
            write_durably(&dir, SNAPSHOT_FILE, &file).map_err(io_error)?;
            Ok::<_, StorageError<NodeId>>(data)
        })
        .await
        .map_err(io_error)??;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<QueueRaft> for QueueStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let inner = self.shared.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<QueueRaft>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.shared.lock();
        let mut responses = Vec::new();
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
                        if let Some(stored) = inner.index.enqueue(id, message) {
                            if inner.leading {
                                let mut queued = QueueEntry::new(id, stored.message);
                                queued.delivery_count = stored.delivery_count;
                                inner.dispatcher.push(queued);
                            }
                        }
                    }
                }
                EntryPayload::Normal(Command::Settle { ids, kind }) => {
                    log_bytes += 8 * ids.len() as u64;
                    for id in ids {
                        let failed_count = inner.index.settle(id, kind);
                        if !inner.leading {
                            continue;
                        }
                        match (kind, failed_count) {
                            (SettleKind::Remove, _) => inner.dispatcher.remove(id),
                            // The dispatcher may have been rebuilt from the
                            // index before this entry applied (a restarted
                            // leader applies its log tail after it leads):
                            // it must not hand the message out with a
                            // delivery-count below the replicated one.
                            (SettleKind::Failed, Some(count)) => {
                                inner.dispatcher.raise_delivery_count(id, count)
                            }
                            (SettleKind::Failed, None) => {}
                        }
                    }
                }
                EntryPayload::Membership(membership) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
            responses.push(Applied);
        }
        let live_bytes = inner.index.bytes();
        if inner
            .growth
            .applied(log_bytes, live_bytes, self.shared.snapshot_floor_bytes)
        {
            tracing::debug!(
                log_bytes = inner.growth.since_snapshot(),
                live_bytes,
                "quorum queue: log grew past its snapshot threshold"
            );
            self.shared.snapshot_wanted.signal();
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let index = MessageIndex::decode(&data).map_err(read_error)?;
        let file = encode_file(meta, &data)?;
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || write_durably(&dir, SNAPSHOT_FILE, &file))
            .await
            .map_err(io_error)?
            .map_err(io_error)?;
        let mut inner = self.shared.lock();
        inner.index = index;
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<QueueRaft>>, StorageError<NodeId>> {
        let path = self.dir.join(SNAPSHOT_FILE);
        let file = match tokio::fs::read(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_error(e)),
        };
        let (meta, data) = decode_file(&file)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data.to_vec())),
        }))
    }
}
