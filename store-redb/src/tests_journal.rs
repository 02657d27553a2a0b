//! Crate-internal tests of the append journal (`journal.rs`) as the store
//! uses it: appends durable before they reach the tables, folds (on a
//! vote, a truncate, a purge, a full journal, a clean close) and replay
//! after a power cut.
//!
//! They guard against: an append acknowledged before its journal sync, a
//! fold that loses or reorders what the journal held, a replay that
//! misses an acknowledged append, and a store switched off the journal
//! that forgets what the journal still held; and that records written with
//! direct I/O land whole in the file.

use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};

use crate::lossy_file::CrashSwitch;
use crate::tests::{
    counter, disk_dir, entries, holds_for, log_id, log_ids, reached_within, rows, wait_until,
    TestConfig,
};
use crate::{GroupLogStore, LogStore, LogStoreOptions};

fn with_journal(bytes: u64) -> LogStoreOptions {
    LogStoreOptions {
        journal_bytes: bytes,
        ..LogStoreOptions::default()
    }
}

fn open_lossy(
    dir: &tempfile::TempDir,
    journal_bytes: u64,
) -> (LogStore, std::sync::Arc<CrashSwitch>) {
    let switch = CrashSwitch::new();
    let store = LogStore::open_lossy(
        &dir.path().join("log.redb"),
        switch.clone(),
        with_journal(journal_bytes),
    )
    .unwrap();
    (store, switch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journaled_appends_are_durable_before_they_reach_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path().join("log.redb"), with_journal(1 << 20)).unwrap();
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let mut reader = group.get_log_reader().await;
    let (flushed, on_flushed) = counter();

    // Holds back every redb commit, so nothing can reach the tables.
    let blocker = store.db().begin_write().unwrap();
    group
        .append_with(entries(1, 0..5), on_flushed())
        .await
        .unwrap();
    // Durable through the journal alone.
    wait_until(|| flushed.load(Ordering::SeqCst) == 1).await;
    assert_eq!(store.stats().commits, 1);
    assert_eq!(
        group.tail_len(),
        5,
        "not in the tables yet: served from the tail"
    );
    let got = reader.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 0..5)));

    // A vote goes through the tables, after the journal's appends: it
    // waits for the fold, which waits for the blocker.
    let mut voter: GroupLogStore<TestConfig> = store.group(2).unwrap();
    let vote = tokio::spawn(async move {
        voter.save_vote(&Vote::new(1, 0)).await.unwrap();
        voter
    });
    holds_for(
        Duration::from_millis(50),
        "vote saved before the fold",
        || !vote.is_finished(),
    )
    .await;
    drop(blocker);
    let mut voter = vote.await.unwrap();
    assert_eq!(voter.read_vote().await.unwrap(), Some(Vote::new(1, 0)));
    assert_eq!(group.tail_len(), 0, "folded entries leave the tail");
    let got = reader.try_get_log_entries(2..4).await.unwrap();
    assert_eq!(log_ids(&got), vec![log_id(1, 2), log_id(1, 3)]);
    assert_eq!(store.verify().unwrap().n_entries, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_cut_loses_no_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, switch) = open_lossy(&dir, 1 << 20);
        let mut group: GroupLogStore<TestConfig> = store.group(3).unwrap();
        group.blocking_append(entries(1, 0..4)).await.unwrap();
        group.save_committed(Some(log_id(1, 2))).await.unwrap();
        group.blocking_append(entries(1, 4..6)).await.unwrap();
        // Nothing has been folded: the tables hold no entry, the journal
        // all six.
        assert_eq!(store.verify().unwrap().n_entries, 0);
        switch.crash();
        // Closing tries to fold and finds the power gone.
    }
    let (store, _) = open_lossy(&dir, 1 << 20);
    let mut group: GroupLogStore<TestConfig> = store.group(3).unwrap();
    assert_eq!(
        store.verify().unwrap().n_entries,
        6,
        "replayed into the tables"
    );
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 0..6)));
    assert_eq!(group.read_committed().await.unwrap(), Some(log_id(1, 2)));
    assert_eq!(
        group.get_log_state().await.unwrap().last_log_id,
        Some(log_id(1, 5))
    );
    // The replayed generation is closed: appends after it and a clean
    // close give each entry once, in order.
    group.blocking_append(entries(2, 6..8)).await.unwrap();
    drop(group);
    drop(store);
    let (store, _) = open_lossy(&dir, 1 << 20);
    let mut group: GroupLogStore<TestConfig> = store.group(3).unwrap();
    let got = group.try_get_log_entries(0..10).await.unwrap();
    let mut want = log_ids(&entries(1, 0..6));
    want.extend(log_ids(&entries(2, 6..8)));
    assert_eq!(log_ids(&got), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_and_purge_fold_the_journal_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let mut want = log_ids(&entries(1, 4..6));
    want.extend(log_ids(&entries(2, 6..9)));
    {
        let store = LogStore::open(&path, with_journal(1 << 20)).unwrap();
        let mut group: GroupLogStore<TestConfig> = store.group(4).unwrap();
        group.blocking_append(entries(1, 0..10)).await.unwrap();
        group.truncate_after(Some(log_id(1, 5))).await.unwrap();
        // The truncate's commit folded the ten and then cut four.
        assert_eq!(group.tail_len(), 0);
        assert_eq!(store.verify().unwrap().n_entries, 6);
        group.blocking_append(entries(2, 6..9)).await.unwrap();
        group.purge(log_id(1, 3)).await.unwrap();
        let got = group.try_get_log_entries(0..20).await.unwrap();
        assert_eq!(log_ids(&got), want);
    }
    let store = LogStore::open(&path, with_journal(1 << 20)).unwrap();
    let mut group: GroupLogStore<TestConfig> = store.group(4).unwrap();
    let got = group.try_get_log_entries(0..20).await.unwrap();
    assert_eq!(log_ids(&got), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_journal_folds_and_keeps_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let n = 300u64;
    {
        // Room for a few dozen of these appends per generation.
        let store = LogStore::open(&path, with_journal(4096)).unwrap();
        let mut group: GroupLogStore<TestConfig> = store.group(5).unwrap();
        for i in 0..n {
            group.blocking_append(entries(1, i..i + 1)).await.unwrap();
        }
        assert!(
            (group.tail_len() as u64) < n / 4,
            "folds let the tail go: {} left",
            group.tail_len()
        );
        assert!(store.verify().unwrap().n_entries >= n - n / 4);
        let got = group.try_get_log_entries(0..n).await.unwrap();
        assert_eq!(log_ids(&got), log_ids(&entries(1, 0..n)));
    }
    let store = LogStore::open(&path, with_journal(4096)).unwrap();
    assert_eq!(store.verify().unwrap().n_entries, n, "a clean close folds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_without_the_journal_replays_and_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    {
        let (store, switch) = open_lossy(&dir, 1 << 20);
        let mut group: GroupLogStore<TestConfig> = store.group(6).unwrap();
        group.blocking_append(entries(1, 0..3)).await.unwrap();
        switch.crash();
    }
    let journal = dir.path().join("log.redb.journal");
    assert!(journal.exists());
    let store = LogStore::open(&path, with_journal(0)).unwrap();
    assert!(!journal.exists(), "the folded journal is removed");
    let mut group: GroupLogStore<TestConfig> = store.group(6).unwrap();
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 0..3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_go_on_in_the_other_region_while_a_fold_waits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let n = 200u64;
    {
        // Regions of 4 KiB: a few dozen one-entry appends each.
        let store = LogStore::open(&path, with_journal(8192)).unwrap();
        let mut group: GroupLogStore<TestConfig> = store.group(7).unwrap();
        let mut reader = group.get_log_reader().await;
        let (flushed, on_flushed) = counter();
        // No redb commit can land: the fold of the first region waits.
        let blocker = store.db().begin_write().unwrap();
        for i in 0..80 {
            group
                .append_with(entries(1, i..i + 1), on_flushed())
                .await
                .unwrap();
            wait_until(|| flushed.load(Ordering::SeqCst) == i as usize + 1).await;
        }
        // Past the first region, all durable, none folded.
        assert_eq!(store.stats().journal_folds, 0);
        assert_eq!(group.tail_len(), 80);
        for i in 80..n {
            group
                .append_with(entries(1, i..i + 1), on_flushed())
                .await
                .unwrap();
        }
        // Once the second region is full too, the writer waits for the fold.
        holds_for(
            Duration::from_millis(50),
            "appends acknowledged past two regions while their fold waits",
            || flushed.load(Ordering::SeqCst) < n as usize,
        )
        .await;
        drop(blocker);
        wait_until(|| flushed.load(Ordering::SeqCst) == n as usize).await;
        assert!(store.stats().journal_folds >= 1);
        let got = reader.try_get_log_entries(0..n).await.unwrap();
        assert_eq!(log_ids(&got), log_ids(&entries(1, 0..n)));
    }
    let store = LogStore::open(&path, with_journal(8192)).unwrap();
    assert_eq!(store.verify().unwrap().n_entries, n, "a clean close folds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_backlog_drains_beside_the_journal_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path().join("log.redb"), with_journal(1 << 20)).unwrap();
    let mut group: GroupLogStore<TestConfig> = store.group(8).unwrap();
    let n = 3_000u64;
    for chunk in 0..n / 100 {
        group
            .blocking_append(entries(1, chunk * 100..(chunk + 1) * 100))
            .await
            .unwrap();
    }
    // The purge folds the journal, then leaves its rows to the backlog,
    // which a quiet writer deletes a step per commit (1,024 rows each):
    // three commits in all, and no journal record in between.
    let before = store.stats().commits;
    group.purge(log_id(1, 2_499)).await.unwrap();
    wait_until(|| rows(&store, 8, 0..=2_499) == 0).await;
    assert_eq!(rows(&store, 8, 2_500..=n), 500);
    let commits = store.stats().commits;
    assert!(
        commits - before <= 3,
        "{} commits for a purge",
        commits - before
    );
    // Then the writer sleeps: no commit, no journal record, while idle.
    holds_for(
        Duration::from_millis(200),
        "an idle writer kept writing",
        || store.stats().commits == commits,
    )
    .await;
    let got = group.try_get_log_entries(0..n).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 2_500..n)));
}

/// The tables' backend of [`a_failed_fold_is_published_at_once`]: in
/// memory, its writes fail with ENOSPC while `full` is set, counted in
/// `refused`.
#[derive(Debug, Default)]
struct FullDisk {
    inner: redb::backends::InMemoryBackend,
    full: std::sync::Arc<std::sync::atomic::AtomicBool>,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl redb::StorageBackend for FullDisk {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        if self.full.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.inner.write(offset, data)
    }
}

/// A fold that fails (the disk under the tables is full) is published on
/// the store's failure watch by the fold thread, not when the writer next
/// waits for the fold: the writer may sit idle meanwhile (publishers held
/// back by a full disk's alarm), and the process must fail-stop while the
/// disk is full, not after it was freed. Every append stays acknowledged:
/// the journal holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fold_is_published_at_once() {
    let tables = FullDisk::default();
    let full = tables.full.clone();
    let refused = tables.refused.clone();
    let journal = Box::new(redb::backends::InMemoryBackend::new());
    let store = LogStore::open_with_backends(tables, Some(journal), with_journal(8192)).unwrap();
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let (flushed, on_flushed) = counter();
    full.store(true, Ordering::SeqCst);

    // Appends until the first region's fold has started and failed. Had
    // the failure waited for the writer, the second region would fill,
    // the writer would wait for the fold, and an append would fail (the
    // counter's completion asserts success). After each append the fold
    // thread gets up to 100 ms to try a region handed to it, and once the
    // disk refused it, a second to publish the failure: on a loaded
    // machine it lagged so far behind the appends that the second region
    // filled before it had tried the first.
    let mut batches = 0;
    while store.failure().is_none() {
        assert!(batches < 1_000, "no fold failure published");
        let first = batches * 4;
        group
            .append_with(entries(1, first..first + 4), on_flushed())
            .await
            .unwrap();
        batches += 1;
        wait_until(|| flushed.load(Ordering::SeqCst) == batches as usize).await;
        if reached_within(Duration::from_millis(100), || {
            refused.load(Ordering::SeqCst) > 0
        })
        .await
        {
            reached_within(Duration::from_secs(1), || store.failure().is_some()).await;
        }
    }
    let failure = store.failure().unwrap();
    assert!(failure.to_string().contains("os error 28"), "{failure}");
    assert_eq!(store.stats().journal_folds, 0);

    // The writer is poisoned once it needs the fold: a vote fails.
    let refused = group.save_vote(&Vote::new(2, 1)).await.unwrap_err();
    assert!(refused.to_string().contains("os error 28"), "{refused}");
}

/// On a disk file system (`/var/tmp`) every journal record is written
/// directly, packed records of many sizes land whole (read back, folded,
/// replayed by the next open), and a store asked not to writes none so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_records_are_written_directly_where_the_disk_allows() {
    let dir = disk_dir();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let supported = crate::direct_write::DirectWriter::open(&probe)
        .unwrap()
        .is_some();
    for direct in [true, false] {
        let path = dir.path().join(format!("log-{direct}.redb"));
        let options = LogStoreOptions {
            journal_direct: direct,
            ..with_journal(16 * 1024)
        };
        let n = 1500u64;
        {
            let store = LogStore::open(&path, options.clone()).unwrap();
            let mut group: GroupLogStore<TestConfig> = store.group(3).unwrap();
            // One to seven entries per append: records of many lengths,
            // packed across block boundaries and both regions.
            let mut i = 0;
            while i < n {
                let k = (i % 7 + 1).min(n - i);
                group.blocking_append(entries(1, i..i + k)).await.unwrap();
                i += k;
            }
            let stats = store.stats();
            assert!(stats.journal_folds > 0, "the regions filled and folded");
            let expected = if direct && supported {
                stats.commits
            } else {
                0
            };
            assert_eq!(stats.journal_direct_writes, expected);
            let got = group.try_get_log_entries(0..n).await.unwrap();
            assert_eq!(log_ids(&got), log_ids(&entries(1, 0..n)));
            // The file itself: the region being written holds the last
            // appends, whole and in order, up to the very last entry.
            let bytes = std::fs::read(crate::store::journal_path(&path)).unwrap();
            let half = bytes.len() / 2;
            let newest = (0..2)
                .filter_map(|r| {
                    let region = &bytes[r * half..(r + 1) * half];
                    let generation = crate::journal_record::header(region)?.generation;
                    Some((
                        generation,
                        crate::journal::scan_bytes(region, generation).unwrap(),
                    ))
                })
                .max_by_key(|(generation, _)| *generation)
                .expect("a region with records");
            let indexes: Vec<u64> = newest
                .1
                .iter()
                .flat_map(|a| a.records.iter().map(|(index, _)| *index))
                .collect();
            assert!(indexes.len() > 1, "{indexes:?}");
            assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
            assert_eq!(indexes.last(), Some(&(n - 1)));
        }
        let store = LogStore::open(&path, options).unwrap();
        assert_eq!(store.verify().unwrap().n_entries, n);
    }
}
