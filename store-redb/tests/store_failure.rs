//! A commit that fails (its fsync or a write returns an error: a bad disk,
//! a full one) poisons the store, fails every later write, and is published
//! on `LogStore::failed` / `LogStore::failure`, so the process owning the
//! store learns of it at once.
//!
//! Guards against issue 14's defect: the store logged "store-redb commit
//! failed; refusing further writes", every Raft group on it stopped, and
//! nothing told the broker, which stayed up serving nothing.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::RaftLogStorage;
use openraft::Vote;
use ramqpd_store_redb::{LogStore, LogStoreOptions};
use redb::backends::InMemoryBackend;
use redb::StorageBackend;

mod common;

use common::TypeConfig;

/// Bound on waiting for the failure to be published (it is published by
/// the writer thread right after the failed commit).
const PUBLISHED_WITHIN: Duration = Duration::from_secs(10);

/// An in-memory backend whose `sync_data` or `write` fail on demand.
#[derive(Debug, Default)]
struct FlakyBackend {
    inner: InMemoryBackend,
    fail_sync: Arc<AtomicBool>,
    fail_write: Arc<AtomicBool>,
}

impl StorageBackend for FlakyBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.fail_write.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.inner.write(offset, data)
    }
}

/// Opens a store on a flaky backend; returns the store and the switches
/// (fail_sync, fail_write).
fn open_flaky() -> (LogStore, Arc<AtomicBool>, Arc<AtomicBool>) {
    let backend = FlakyBackend::default();
    let (fail_sync, fail_write) = (backend.fail_sync.clone(), backend.fail_write.clone());
    let store = LogStore::open_with_backend(backend, LogStoreOptions::default()).unwrap();
    (store, fail_sync, fail_write)
}

async fn fails_and_is_published(store: LogStore, fail: Arc<AtomicBool>, os_error: &str) {
    let mut group = store.group::<TypeConfig>(1).unwrap();
    group.save_vote(&Vote::new(1, 1)).await.unwrap();
    assert!(
        store.failure().is_none(),
        "a healthy store reports no failure"
    );

    // Subscribed before the fault: it must wake up.
    let failed = tokio::spawn(store.failed());
    fail.store(true, Ordering::SeqCst);
    let error = group.save_vote(&Vote::new(2, 1)).await.unwrap_err();
    assert!(error.to_string().contains(os_error), "{error}");

    let published = tokio::time::timeout(PUBLISHED_WITHIN, failed)
        .await
        .expect("LogStore::failed resolves after a failed commit")
        .unwrap();
    assert!(published.to_string().contains(os_error), "{published}");
    // Subscribed after the fault: resolves at once.
    let again = tokio::time::timeout(PUBLISHED_WITHIN, store.failed())
        .await
        .expect("LogStore::failed resolves at once once failed");
    assert_eq!(again.to_string(), published.to_string());
    assert!(store.failure().is_some());

    // Poisoned: the disk works again, the store still refuses.
    fail.store(false, Ordering::SeqCst);
    let later = group.save_vote(&Vote::new(3, 1)).await.unwrap_err();
    assert!(later.to_string().contains(os_error), "{later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_is_published_and_every_later_write_fails() {
    let (store, fail_sync, _) = open_flaky();
    fails_and_is_published(store, fail_sync, "os error 5").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_published_and_every_later_write_fails() {
    let (store, _, fail_write) = open_flaky();
    fails_and_is_published(store, fail_write, "os error 28").await;
}
