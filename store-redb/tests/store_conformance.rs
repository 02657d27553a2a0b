//! openraft's storage conformance suite (`openraft::testing::Suite`) against
//! `GroupLogStore`, twice: once with a fresh database per test, and once
//! with every test's store a different group of ONE database, which also
//! checks that groups sharing the tables do not see each other's records.
//!
//! The suite needs a state machine too; `MemStateMachine` below is a
//! minimal in-memory one, for this test only.

use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use store_redb::{GroupLogStore, LogStore, LogStoreOptions};

openraft::declare_raft_types!(pub TypeConfig);

type NodeId = u64;

#[derive(Default)]
struct SmState {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    current: Option<(SnapshotMeta<NodeId, BasicNode>, Vec<u8>)>,
    n_snapshots: u64,
}

/// A state machine that records only what the suite checks.
#[derive(Clone, Default)]
struct MemStateMachine {
    state: Arc<Mutex<SmState>>,
}

impl MemStateMachine {
    fn lock(&self) -> std::sync::MutexGuard<'_, SmState> {
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
                EntryPayload::Normal(data) => responses.push(data),
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

fn storage_error(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write(AnyError::new(&e)).into()
}

/// A fresh database (in a fresh directory, the guard) per test.
struct FreshDatabase;

impl StoreBuilder<TypeConfig, GroupLogStore<TypeConfig>, MemStateMachine, tempfile::TempDir>
    for FreshDatabase
{
    async fn build(
        &self,
    ) -> Result<
        (
            tempfile::TempDir,
            GroupLogStore<TypeConfig>,
            MemStateMachine,
        ),
        StorageError<NodeId>,
    > {
        let dir = tempfile::tempdir().map_err(storage_error)?;
        let store = LogStore::open(dir.path().join("log.redb"), LogStoreOptions::default())
            .map_err(storage_error)?;
        let group = store.group::<TypeConfig>(7).map_err(storage_error)?;
        Ok((dir, group, MemStateMachine::default()))
    }
}

/// One database for every test; each test gets a new group of it.
struct SharedDatabase {
    store: LogStore,
    next_group_id: AtomicU64,
}

impl StoreBuilder<TypeConfig, GroupLogStore<TypeConfig>, MemStateMachine> for SharedDatabase {
    async fn build(
        &self,
    ) -> Result<((), GroupLogStore<TypeConfig>, MemStateMachine), StorageError<NodeId>> {
        let group_id = self.next_group_id.fetch_add(1, Ordering::Relaxed);
        let group = self
            .store
            .group::<TypeConfig>(group_id)
            .map_err(storage_error)?;
        Ok(((), group, MemStateMachine::default()))
    }
}

#[test]
fn suite_with_a_fresh_database_per_test() {
    if let Err(e) = Suite::test_all(FreshDatabase) {
        panic!("conformance suite: {e}");
    }
}

#[test]
fn suite_with_every_test_a_group_of_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path().join("log.redb"), LogStoreOptions::default()).unwrap();
    let builder = SharedDatabase {
        store: store.clone(),
        next_group_id: AtomicU64::new(100),
    };
    if let Err(e) = Suite::test_all(builder) {
        panic!("conformance suite: {e}");
    }
    // Every test left its group behind in the one file; all still verify.
    let groups = store.groups().unwrap();
    assert!(groups.len() > 10, "the suite wrote many groups: {groups:?}");
    assert!(store.verify().unwrap().n_entries > 0);
}
