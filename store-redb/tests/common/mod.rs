//! Shared by the integration tests: the type config they store and a
//! minimal in-memory state machine (openraft's suite and a real `Raft` both
//! need one; this crate stores logs only).

#![allow(dead_code)]

use std::io::Cursor;
use std::sync::{Arc, Mutex, PoisonError};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};

openraft::declare_raft_types!(pub TypeConfig);

pub type NodeId = u64;

#[derive(Default)]
pub struct SmState {
    pub last_applied: Option<LogId<NodeId>>,
    pub membership: StoredMembership<NodeId, BasicNode>,
    pub current: Option<(SnapshotMeta<NodeId, BasicNode>, Vec<u8>)>,
    pub n_snapshots: u64,
    /// The data of every applied normal entry, in order.
    pub applied_data: Vec<String>,
}

/// A state machine that records what the tests check. Clones share state,
/// so a clone kept across a `Raft` restart plays a persistent state machine.
#[derive(Clone, Default)]
pub struct MemStateMachine {
    pub state: Arc<Mutex<SmState>>,
}

impl MemStateMachine {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, SmState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let mut state = self.lock();
        state.n_snapshots += 1;
        let meta = SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
            snapshot_id: format!("snapshot-{}", state.n_snapshots),
        };
        let data = postcard::to_allocvec(&(&state.last_applied, &state.membership))
            .map_err(|e| StorageIOError::write_snapshot(None, AnyError::new(&e)))?;
        state.current = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for MemStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let state = self.lock();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut state = self.lock();
        let mut responses = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => responses.push(String::new()),
                EntryPayload::Normal(data) => {
                    state.applied_data.push(data.clone());
                    responses.push(data);
                }
                EntryPayload::Membership(m) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), m);
                    responses.push(String::new());
                }
            }
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
        let mut state = self.lock();
        state.last_applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        state.current = Some((meta.clone(), snapshot.into_inner()));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.lock().current.clone().map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
