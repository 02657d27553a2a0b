//! openraft's state machine for the metadata group: applies
//! [`MetaCommand`]s to the [`ClusterState`], publishes the applied version,
//! and builds, stores and installs snapshots. A snapshot is the whole
//! encoded state (metadata is small) with a CRC32C, kept in
//! `<dir>/snapshot.bin` (temporary file, fsync, rename), so a restarted
//! node loads it and replays only the log after it.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::{Stream, StreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder, StoredMembership};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::state::{ClusterState, MetaResponse};
use super::types::MetaRaft;
use crate::raft::SnapshotCover;

/// What the state machine holds.
#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) state: ClusterState,
    pub(crate) last_applied: Option<LogIdOf<MetaRaft>>,
    pub(crate) membership: StoredMembershipOf<MetaRaft>,
}

/// State shared by the state machine (apply) and the `Metadata` handle
/// (reads). The lock is held only for short, non-async steps.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    version: watch::Sender<u64>,
    /// What the durable snapshot file covers: the log purge waits for it
    /// (`raft::PurgeGatedLog`).
    pub(crate) snapshot_cover: SnapshotCover,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            inner: Mutex::new(Inner::default()),
            version: watch::Sender::new(0),
            snapshot_cover: SnapshotCover::default(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver of the applied state's version.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Publish `version` (called after the lock is released, so a watcher
    /// woken by it can read the state at once).
    fn publish(&self, version: u64) {
        self.version.send_if_modified(|v| {
            let changed = *v != version;
            *v = version;
            changed
        });
    }
}

type Meta = SnapshotMetaOf<MetaRaft>;

/// A metadata snapshot: meta and the sealed state.
type MetaSnapshot = SnapshotOf<MetaRaft, Cursor<Vec<u8>>>;

/// File holding the latest snapshot.
const SNAPSHOT_FILE: &str = "snapshot.bin";

/// Magic + version at the start of a snapshot file.
pub(super) const MAGIC: &[u8; 8] = b"RAMQPM01";

/// The snapshot data openraft ships between nodes: the state alone.
#[derive(Serialize, Deserialize)]
pub(super) struct FileBody {
    meta: Meta,
    state: ClusterState,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Corrupt(String);

fn io_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::other(e)
}

fn read_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

/// `MAGIC`, postcard `value`, CRC32C of both (LE).
pub(super) fn seal<T: Serialize>(value: &T) -> Result<Vec<u8>, std::io::Error> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&postcard::to_allocvec(value).map_err(io_error)?);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The inverse of [`seal`], refusing bad magic, truncation and bit flips.
pub(super) fn unseal<T: serde::de::DeserializeOwned>(data: &[u8]) -> Result<T, std::io::Error> {
    if data.len() < MAGIC.len() + 4 || &data[..MAGIC.len()] != MAGIC {
        return Err(read_error(Corrupt("metadata snapshot truncated".into())));
    }
    let (body, crc) = data.split_at(data.len() - 4);
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32c::crc32c(body) != crc {
        return Err(read_error(Corrupt("metadata snapshot checksum".into())));
    }
    postcard::from_bytes(&body[MAGIC.len()..]).map_err(read_error)
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

/// The metadata group's state machine.
#[derive(Clone)]
pub(crate) struct MetaStateMachine {
    shared: Arc<Shared>,
    dir: PathBuf,
}

impl MetaStateMachine {
    /// The state machine whose snapshot lives in `dir`, restored from it if
    /// there is one.
    pub(crate) fn open(
        dir: &Path,
        shared: Arc<Shared>,
    ) -> Result<MetaStateMachine, std::io::Error> {
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let machine = MetaStateMachine {
            shared,
            dir: dir.to_path_buf(),
        };
        match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(file) => {
                let body: FileBody = unseal(&file)?;
                machine
                    .shared
                    .snapshot_cover
                    .recorded(body.meta.last_log_id.map(|l| l.index));
                machine.install(&body.meta, body.state);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(read_error(e)),
        }
        Ok(machine)
    }

    fn install(&self, meta: &Meta, state: ClusterState) {
        let version = state.version;
        {
            let mut inner = self.shared.lock();
            inner.state = state;
            inner.last_applied = meta.last_log_id;
            inner.membership = meta.last_membership.clone();
        }
        self.shared.publish(version);
    }

    async fn store(&self, body: &FileBody) -> Result<(), std::io::Error> {
        let file = seal(body)?;
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || write_durably(&dir, SNAPSHOT_FILE, &file))
            .await
            .map_err(io_error)?
            .map_err(io_error)?;
        self.shared
            .snapshot_cover
            .recorded(body.meta.last_log_id.map(|l| l.index));
        Ok(())
    }
}

impl RaftSnapshotBuilder<MetaRaft> for MetaStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<MetaSnapshot, std::io::Error> {
        let body = {
            let inner = self.shared.lock();
            let meta = Meta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
            };
            FileBody {
                meta,
                state: inner.state.clone(),
            }
        };
        self.store(&body).await?;
        let data = seal(&body.state)?;
        Ok(MetaSnapshot {
            meta: body.meta,
            snapshot: Cursor::new(data),
        })
    }
}

impl RaftStateMachine<MetaRaft> for MetaStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<MetaRaft>>, StoredMembershipOf<MetaRaft>), std::io::Error> {
        let inner = self.shared.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<S>(&mut self, mut stream: S) -> Result<(), std::io::Error>
    where
        S: Stream<Item = Result<EntryResponder<MetaRaft>, std::io::Error>> + Unpin + Send,
    {
        // Taken off the stream first: the lock is never held across an
        // await.
        let mut entries = Vec::new();
        while let Some(item) = stream.next().await {
            entries.push(item?);
        }
        let mut responses = Vec::new();
        let version = {
            let mut inner = self.shared.lock();
            for (entry, responder) in entries {
                inner.last_applied = Some(entry.log_id);
                let response = match entry.payload {
                    EntryPayload::Blank => MetaResponse::Done,
                    EntryPayload::Normal(command) => inner.state.apply(command),
                    EntryPayload::Membership(membership) => {
                        inner.state.seed_members(
                            membership
                                .nodes()
                                .filter(|(id, _)| membership.voter_ids().any(|v| v == **id))
                                .map(|(id, node)| (*id, node.addr.as_str())),
                        );
                        inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                        MetaResponse::Done
                    }
                };
                if let Some(responder) = responder {
                    responses.push((responder, response));
                }
            }
            inner.state.version
        };
        self.shared.publish(version);
        for (responder, response) in responses {
            responder.send(response);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), std::io::Error> {
        let state: ClusterState = unseal(snapshot.get_ref())?;
        let body = FileBody {
            meta: meta.clone(),
            state,
        };
        // Durable first: a crash after installing must find it on restart
        // (openraft purges the log it replaces).
        self.store(&body).await?;
        self.install(&body.meta, body.state);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<MetaSnapshot>, std::io::Error> {
        let path = self.dir.join(SNAPSHOT_FILE);
        let file = match tokio::fs::read(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_error(e)),
        };
        let body: FileBody = unseal(&file)?;
        let data = seal(&body.state)?;
        Ok(Some(MetaSnapshot {
            meta: body.meta,
            snapshot: Cursor::new(data),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::state::{MetaCommand, NodeInfo};

    #[test]
    fn sealed_state_round_trips_and_detects_corruption() {
        let mut state = ClusterState::default();
        state.apply(MetaCommand::AddNode {
            id: 1,
            info: NodeInfo {
                fabric: "a:1".into(),
                amqp: None,
            },
        });
        state.apply(MetaCommand::DeclareQueue {
            name: "q".into(),
            replication_factor: 3,
        });
        let sealed = seal(&state).unwrap();
        let back: ClusterState = unseal(&sealed).unwrap();
        assert_eq!(back, state);
        let mut flipped = sealed.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x10;
        assert!(unseal::<ClusterState>(&flipped).is_err());
        assert!(unseal::<ClusterState>(&sealed[..6]).is_err());
    }
}
