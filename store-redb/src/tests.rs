//! Crate-internal tests of the write path that need to hold the writer back:
//! a test holds a redb write transaction open, which blocks the writer
//! thread at `begin_write`, so "appended but not yet durable" lasts as long
//! as the test wants. The stores here have no append journal, so every
//! write goes through a redb commit.
//!
//! They guard against: entries not readable before their commit lands,
//! completions fired before the fsync, a truncate or purge leaving the tail
//! and the disk inconsistent, and a group commit that does not batch.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::RaftLogStorage;
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId, RaftLogReader, Vote};

use crate::writer::Completion;
use crate::{GroupLogStore, LogStore, LogStoreOptions};

openraft::declare_raft_types!(pub(crate) TestConfig);

pub(crate) fn log_id(term: u64, index: u64) -> LogId<CommittedLeaderId<u64, u64>> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

pub(crate) fn entry(term: u64, index: u64) -> openraft::alias::EntryOf<TestConfig> {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(format!("t{term}-i{index}")),
    }
}

pub(crate) fn entries(
    term: u64,
    indexes: std::ops::Range<u64>,
) -> Vec<openraft::alias::EntryOf<TestConfig>> {
    indexes.map(|i| entry(term, i)).collect()
}

/// A completion that counts its successful calls.
pub(crate) fn counter() -> (Arc<AtomicUsize>, impl Fn() -> Completion) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (n, move || {
        let n = n2.clone();
        Box::new(move |r: Result<(), crate::Error>| {
            assert!(r.is_ok(), "{r:?}");
            n.fetch_add(1, Ordering::SeqCst);
        })
    })
}

pub(crate) async fn wait_until(cond: impl FnMut() -> bool) {
    wait_until_within(Duration::from_secs(5), cond).await;
}

async fn wait_until_within(limit: Duration, cond: impl FnMut() -> bool) {
    assert!(
        reached_within(limit, cond).await,
        "condition not reached in {limit:?}"
    );
}

/// Whether `cond` holds within `limit` (checked every 10 ms): for a
/// condition that may rightly never come.
pub(crate) async fn reached_within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while !cond() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Asserts that `cond` holds throughout `quiet`, polled every 10 ms.
///
/// Why a window and not a condition: it backs negative checks ("no
/// completion fires while the commit is held back"). The writer is an OS
/// thread that, when correct, just sits in `begin_write`; there is no event
/// to await, so the window is how long a wrong writer gets to show itself.
pub(crate) async fn holds_for(quiet: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + quiet;
    loop {
        assert!(cond(), "stopped holding within {quiet:?}: {what}");
        if std::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(crate) fn log_ids(
    es: &[openraft::alias::EntryOf<TestConfig>],
) -> Vec<LogId<CommittedLeaderId<u64, u64>>> {
    es.iter().map(|e| e.log_id).collect()
}

/// A temporary directory on a disk file system if there is one
/// (`/var/tmp`), where the journal's direct writes work; tmpfs, often
/// `/tmp`, refuses them.
pub(crate) fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("store-redb")
        .tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory")
}

/// A store without the append journal: these tests hold the writer back at
/// `begin_write`, which a journaled append never reaches (the journal's
/// own tests are in `tests_journal.rs`).
fn open(dir: &tempfile::TempDir) -> LogStore {
    let options = LogStoreOptions {
        journal_bytes: 0,
        ..LogStoreOptions::default()
    };
    LogStore::open(dir.path().join("log.redb"), options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_entries_are_readable_before_they_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let mut reader = group.get_log_reader().await;
    let (flushed, on_flushed) = counter();

    let blocker = store.db().begin_write().unwrap();
    group
        .append_with(entries(1, 0..5), on_flushed())
        .await
        .unwrap();
    // The writer has taken the append off its queue: from here on it can
    // only be inside `begin_write`, waiting for `blocker`.
    wait_until(|| store.queued_requests() == 0).await;
    holds_for(
        Duration::from_millis(50),
        "flushed before the commit",
        || flushed.load(Ordering::SeqCst) == 0,
    )
    .await;
    assert_eq!(group.tail_len(), 5);
    let got = reader.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 0..5)));
    assert_eq!(store.stats().commits, 0);

    drop(blocker);
    wait_until(|| flushed.load(Ordering::SeqCst) == 1).await;
    assert_eq!(group.tail_len(), 0, "durable entries leave the tail");
    let got = reader.try_get_log_entries(2..4).await.unwrap();
    assert_eq!(log_ids(&got), vec![log_id(1, 2), log_id(1, 3)]);
}

// One runtime thread on purpose: see the `is_finished` check below.
#[tokio::test(flavor = "current_thread")]
async fn save_vote_returns_only_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let (flushed, on_flushed) = counter();
    let blocker = store.db().begin_write().unwrap();
    // An append ahead of the vote: the writer takes it and then waits in
    // `begin_write` for `blocker`, so the vote stays in the queue where the
    // test can see that it was sent.
    group
        .append_with(entries(1, 0..1), on_flushed())
        .await
        .unwrap();
    wait_until(|| store.queued_requests() == 0).await;
    let vote = Vote::new(3, 0);
    let task = tokio::spawn(async move {
        group.save_vote(&vote).await.unwrap();
        group
    });
    wait_until(|| store.queued_requests() == 1).await;
    // The task's poll that queued the vote ran on this same thread and has
    // returned: a save_vote that did not wait for its commit is finished now.
    assert!(!task.is_finished(), "save_vote returned before its commit");
    drop(blocker);
    let mut group = task.await.unwrap();
    assert_eq!(flushed.load(Ordering::SeqCst), 1);
    assert_eq!(group.read_vote().await.unwrap(), Some(vote));
    drop(group);
    drop(store);
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    assert_eq!(group.read_vote().await.unwrap(), Some(vote));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_over_pending_and_durable_entries_then_append_a_new_term() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let mut reader = group.get_log_reader().await;
    let (flushed, on_flushed) = counter();

    // 0..3 durable, 3..6 pending.
    group
        .append_with(entries(1, 0..3), on_flushed())
        .await
        .unwrap();
    wait_until(|| flushed.load(Ordering::SeqCst) == 1).await;
    let blocker = store.db().begin_write().unwrap();
    group
        .append_with(entries(1, 3..6), on_flushed())
        .await
        .unwrap();

    // Truncate at 2 cuts one durable and three pending entries.
    let task = tokio::spawn(async move {
        group.truncate_after(Some(log_id(1, 1))).await.unwrap();
        group
    });
    wait_until(|| reader.shared.lock().last_log_id == Some(log_id(1, 1))).await;
    let got = reader.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), vec![log_id(1, 0), log_id(1, 1)]);
    assert!(!task.is_finished());

    drop(blocker);
    let mut group = task.await.unwrap();
    group
        .append_with(entries(2, 2..4), on_flushed())
        .await
        .unwrap();
    let got = reader.try_get_log_entries(0..10).await.unwrap();
    let want = vec![log_id(1, 0), log_id(1, 1), log_id(2, 2), log_id(2, 3)];
    assert_eq!(log_ids(&got), want);
    wait_until(|| flushed.load(Ordering::SeqCst) == 3).await;

    drop((group, reader));
    drop(store);
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), want);
    assert_eq!(
        group.get_log_state().await.unwrap().last_log_id,
        Some(log_id(2, 3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_truncate_still_lands_before_later_appends() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let (flushed, on_flushed) = counter();
    group
        .append_with(entries(1, 0..6), on_flushed())
        .await
        .unwrap();
    wait_until(|| flushed.load(Ordering::SeqCst) == 1).await;

    let blocker = store.db().begin_write().unwrap();
    // Staged and queued, then abandoned before its commit.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        group.truncate_after(Some(log_id(1, 2))),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the truncate cannot finish while blocked"
    );
    // Leaves a gap at 4 while the stale durable 4 is still on disk.
    group
        .append_with(vec![entry(2, 3), entry(2, 5)], on_flushed())
        .await
        .unwrap();
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(
        log_ids(&got),
        vec![
            log_id(1, 0),
            log_id(1, 1),
            log_id(1, 2),
            log_id(2, 3),
            log_id(2, 5)
        ]
    );
    drop(blocker);
    wait_until(|| flushed.load(Ordering::SeqCst) == 2).await;
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(
        log_ids(&got),
        vec![
            log_id(1, 0),
            log_id(1, 1),
            log_id(1, 2),
            log_id(2, 3),
            log_id(2, 5)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_while_entries_are_pending() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let mut reader = group.get_log_reader().await;
    let (flushed, on_flushed) = counter();
    let blocker = store.db().begin_write().unwrap();
    group
        .append_with(entries(1, 0..6), on_flushed())
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        group.purge(log_id(1, 3)).await.unwrap();
        group
    });
    wait_until(|| reader.shared.lock().last_purged == Some(log_id(1, 3))).await;
    let got = reader.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), vec![log_id(1, 4), log_id(1, 5)]);
    drop(blocker);
    let mut group = task.await.unwrap();
    assert_eq!(flushed.load(Ordering::SeqCst), 1);
    let state = group.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 3)));
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    drop((group, reader));
    drop(store);
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let got = group.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(log_ids(&got), vec![log_id(1, 4), log_id(1, 5)]);
    assert_eq!(store.verify().unwrap().n_entries, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_many_groups_share_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let n_groups = 20u64;
    let mut groups: Vec<GroupLogStore<TestConfig>> =
        (0..n_groups).map(|g| store.group(g).unwrap()).collect();
    let (flushed, on_flushed) = counter();
    let blocker = store.db().begin_write().unwrap();
    for group in &mut groups {
        group
            .append_with(entries(1, 0..3), on_flushed())
            .await
            .unwrap();
    }
    drop(blocker);
    wait_until(|| flushed.load(Ordering::SeqCst) == n_groups as usize).await;
    let stats = store.stats();
    // The writer may have drained the first few requests before blocking at
    // `begin_write`; everything queued after that waited and went into ONE
    // transaction. So 20 groups' appends cost at most two fsyncs.
    assert!(stats.commits <= 2, "{stats:?}");
    assert_eq!(stats.requests, n_groups);
    assert_eq!(stats.entries, 3 * n_groups);
    assert_eq!(store.groups().unwrap(), (0..n_groups).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_live_handle_per_group_and_removal() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let (flushed, on_flushed) = counter();
    // Neighbours on both sides of group 5 in key order.
    for g in [4, 6] {
        let mut neighbour: GroupLogStore<TestConfig> = store.group(g).unwrap();
        neighbour
            .append_with(entries(1, 0..4), on_flushed())
            .await
            .unwrap();
        neighbour.save_vote(&Vote::new(1, 0)).await.unwrap();
    }
    let mut group: GroupLogStore<TestConfig> = store.group(5).unwrap();
    assert!(matches!(
        store.group::<TestConfig>(5),
        Err(crate::Error::GroupOpen { group_id: 5 })
    ));
    group
        .append_with(entries(1, 0..4), on_flushed())
        .await
        .unwrap();
    group.save_vote(&Vote::new(1, 0)).await.unwrap();
    assert_eq!(flushed.load(Ordering::SeqCst), 3);
    assert!(matches!(
        store.remove_group(5).await,
        Err(crate::Error::GroupOpen { group_id: 5 })
    ));
    drop(group);
    // Reopening the group in the same process finds the same state.
    let mut group: GroupLogStore<TestConfig> = store.group(5).unwrap();
    assert_eq!(group.read_vote().await.unwrap(), Some(Vote::new(1, 0)));
    drop(group);
    assert_eq!(store.groups().unwrap(), vec![4, 5, 6]);
    store.remove_group(5).await.unwrap();
    assert_eq!(store.groups().unwrap(), vec![4, 6]);
    let mut group: GroupLogStore<TestConfig> = store.group(5).unwrap();
    assert_eq!(group.read_vote().await.unwrap(), None);
    assert_eq!(group.get_log_state().await.unwrap().last_log_id, None);
    drop(group);
    drop(store);
    let store = open(&dir);
    assert_eq!(store.verify().unwrap().n_entries, 8);
    for g in [4, 6] {
        let mut neighbour: GroupLogStore<TestConfig> = store.group(g).unwrap();
        let got = neighbour.try_get_log_entries(0..10).await.unwrap();
        assert_eq!(log_ids(&got), log_ids(&entries(1, 0..4)));
        assert_eq!(neighbour.read_vote().await.unwrap(), Some(Vote::new(1, 0)));
    }
}

/// Held by the tests that write tens of MiB with an fsync per commit, so
/// that they do not run at once: each waits for its own commits within a
/// few seconds, and two of them sharing the disk (and the machine's two
/// cores) missed that.
static HEAVY_IO: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Appends to `group` `chunks` batches of `per_chunk` entries of term 1,
/// indexes from 0, each payload padded with `pad_bytes` bytes of `pad`,
/// every batch with a completion from `on_flushed`.
async fn append_padded(
    group: &mut GroupLogStore<TestConfig>,
    chunks: u64,
    per_chunk: u64,
    pad: char,
    pad_bytes: usize,
    on_flushed: &impl Fn() -> Completion,
) {
    let body = pad.to_string().repeat(pad_bytes);
    for chunk in 0..chunks {
        let batch = (chunk * per_chunk..(chunk + 1) * per_chunk)
            .map(|i| Entry {
                log_id: log_id(1, i),
                payload: EntryPayload::Normal(format!("{i}{body}")),
            })
            .collect();
        group.append_with(batch, on_flushed()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_mostly_freed_by_a_purge_is_compacted() {
    let _heavy = HEAVY_IO.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    // 80 MiB of log in 64 KiB entries, then all of it purged.
    let (flushed, on_flushed) = counter();
    append_padded(&mut group, 16, 80, 'x', 64 * 1024, &on_flushed).await;
    // 80 MiB through fsyncs: seconds on a disk shared with other builds.
    wait_until_within(Duration::from_secs(60), || {
        flushed.load(Ordering::SeqCst) == 16
    })
    .await;
    let full = std::fs::metadata(&path).unwrap().len();
    assert!(
        full > crate::compact::MIN_FILE_BYTES,
        "{full} bytes written"
    );

    group.purge(log_id(1, 16 * 80 - 1)).await.unwrap();
    // The compaction runs on the writer once the store has been idle for a
    // few seconds (a tick wakes it).
    wait_until_within(Duration::from_secs(60), || {
        std::fs::metadata(&path).unwrap().len() < full / 8
    })
    .await;
    // Still a working log: append after the purge, reopen, read it back.
    group
        .append_with(entries(1, 16 * 80..16 * 80 + 3), on_flushed())
        .await
        .unwrap();
    wait_until(|| flushed.load(Ordering::SeqCst) == 17).await;
    drop(group);
    drop(store);
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    let got = group.try_get_log_entries(0..u64::MAX).await.unwrap();
    assert_eq!(log_ids(&got), log_ids(&entries(1, 16 * 80..16 * 80 + 3)));
    assert_eq!(store.verify().unwrap().n_entries, 3);
}

/// Rows of `group` in the entries table with an index in `indexes`.
pub(crate) fn rows(store: &LogStore, group: u64, indexes: std::ops::RangeInclusive<u64>) -> usize {
    use redb::ReadableDatabase;
    let db = store.db();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(crate::tables::ENTRIES).unwrap();
    let range = (group, *indexes.start())..=(group, *indexes.end());
    table.range(range).unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_rows_leave_in_steps_orphans_included() {
    let _heavy = HEAVY_IO.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut group: GroupLogStore<TestConfig> = store.group(1).unwrap();
    // 3,000 entries of 8 KiB (24 MiB: several steps by bytes) in group 1,
    // and a neighbour group whose rows must all stay.
    let mut other: GroupLogStore<TestConfig> = store.group(2).unwrap();
    let (flushed, on_flushed) = counter();
    append_padded(&mut group, 30, 100, 'y', 8 * 1024, &on_flushed).await;
    other
        .append_with(entries(1, 0..50), on_flushed())
        .await
        .unwrap();
    wait_until(|| flushed.load(Ordering::SeqCst) == 31).await;

    group.purge(log_id(1, 2_899)).await.unwrap();
    // The purge is visible and durable at once, the rows go by themselves
    // with nothing else written, and only the purged ones.
    assert_eq!(
        group.get_log_state().await.unwrap().last_purged_log_id,
        Some(log_id(1, 2_899))
    );
    wait_until_within(Duration::from_secs(30), || rows(&store, 1, 0..=2_899) == 0).await;
    assert_eq!(rows(&store, 1, 2_900..=2_999), 100);
    assert_eq!(rows(&store, 2, 0..=u64::MAX), 50);
    let kept = group.try_get_log_entries(2_900..3_000).await.unwrap();
    assert_eq!(kept.len(), 100);
    assert_eq!(kept[0].log_id, log_id(1, 2_900));

    // Rows a crash left below the last purged index (the backlog of a
    // writer that stopped) are taken by the group's next purge.
    {
        let db = store.db();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(crate::tables::ENTRIES).unwrap();
            for i in [3u64, 700, 2_000] {
                table.insert((1, i), b"orphan".as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    assert_eq!(rows(&store, 1, 0..=2_899), 3);
    group.purge(log_id(1, 2_949)).await.unwrap();
    wait_until_within(Duration::from_secs(30), || rows(&store, 1, 0..=2_949) == 0).await;
    assert_eq!(rows(&store, 1, 2_950..=2_999), 50);
}
