//! Shared by the integration tests: the type config they store and a
//! minimal in-memory state machine (openraft's suite and a real `Raft` both
//! need one; this crate stores logs only).

#![allow(dead_code)]

use std::io::{self, Cursor};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::{Stream, StreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder, StoredMembership};

openraft::declare_raft_types!(pub TypeConfig);

pub type Snapshot = SnapshotOf<TypeConfig, Cursor<Vec<u8>>>;

pub type NodeId = u64;

#[derive(Default)]
pub struct SmState {
    pub last_applied: Option<LogIdOf<TypeConfig>>,
    pub membership: StoredMembershipOf<TypeConfig>,
    pub current: Option<(SnapshotMetaOf<TypeConfig>, Vec<u8>)>,
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
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let mut state = self.lock();
        state.n_snapshots += 1;
        let meta = openraft::SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
        };
        let data = postcard::to_allocvec(&(&state.last_applied, &state.membership))
            .map_err(io::Error::other)?;
        state.current = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Cursor::new(data),
        })
    }
}

impl RaftStateMachine<TypeConfig> for MemStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<TypeConfig>>, StoredMembershipOf<TypeConfig>), io::Error> {
        let state = self.lock();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + Send,
    {
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let response = {
                let mut state = self.lock();
                state.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => String::new(),
                    EntryPayload::Normal(data) => {
                        state.applied_data.push(data.clone());
                        data
                    }
                    EntryPayload::Membership(m) => {
                        state.membership = StoredMembership::new(Some(entry.log_id), m);
                        String::new()
                    }
                }
            };
            if let Some(responder) = responder {
                responder.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), io::Error> {
        let mut state = self.lock();
        state.last_applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        state.current = Some((meta.clone(), snapshot.into_inner()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.lock().current.clone().map(|(meta, data)| Snapshot {
            meta,
            snapshot: Cursor::new(data),
        }))
    }
}
