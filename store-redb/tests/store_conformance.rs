//! openraft's storage conformance suite (`openraft::testing::Suite`) against
//! `GroupLogStore`, twice: once with a fresh database per test, and once
//! with every test's store a different group of ONE database, which also
//! checks that groups sharing the tables do not see each other's records.
//!
//! The suite needs a state machine too; `common::MemStateMachine` is a
//! minimal in-memory one, for the tests only.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use openraft::errors::ErrorSource;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::StorageError;
use ramqpd_store_redb::{GroupLogStore, LogStore, LogStoreOptions};

use common::{MemStateMachine, TypeConfig};

fn storage_error(e: impl std::error::Error + 'static) -> StorageError<TypeConfig> {
    StorageError::write(openraft::impls::BoxedErrorSource::from_error(&e))
}

/// openraft 0.10's suite is async: run it on a runtime of its own.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(f)
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
        StorageError<TypeConfig>,
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
    ) -> Result<((), GroupLogStore<TypeConfig>, MemStateMachine), StorageError<TypeConfig>> {
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
    if let Err(e) = block_on(Suite::test_all(FreshDatabase)) {
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
    if let Err(e) = block_on(Suite::test_all(builder)) {
        panic!("conformance suite: {e}");
    }
    // Every test left its group behind in the one file; all still verify.
    let groups = store.groups().unwrap();
    assert!(groups.len() > 10, "the suite wrote many groups: {groups:?}");
    assert!(store.verify().unwrap().n_entries > 0);
}
