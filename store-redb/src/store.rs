//! [`LogStore`]: the node-wide store. One redb database file, one writer
//! thread, and a registry of the groups open in memory.
//!
//! Ownership: `LogStore` is a cheap handle (`Arc`) over [`Inner`]. The
//! database is shared by every handle and by readers; only the writer thread
//! writes to it (the one exception is [`LogStore::open`], which creates the
//! tables before the writer starts). Dropping the last handle closes the
//! channel, waits for the writer to commit what was queued and exit, and
//! then closes the file; that wait blocks the dropping thread for at most
//! the commits still queued.
//!
//! The registry maps a group id to a weak reference to that group's shared
//! state, so a group is loaded from disk once and every handle and reader of
//! it sees the same in-memory tail.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, Weak};
use std::thread::JoinHandle;

use openraft::RaftTypeConfig;
use redb::{Database, ReadableDatabase};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};

use crate::apply::fold_generation;
use crate::compact::SharedDb;
use crate::direct_write::DirectWriter;
use crate::error::Error;
use crate::group::{ErasedGroup, GroupLogStore, GroupShared};
use crate::journal::Journal;
use crate::layout::init_tables;
use crate::record;
use crate::stats::{BatchStats, BatchStatsSnapshot};
use crate::tables::{MetaKind, RecordKey, COMMITTED_INDEX, ENTRIES, META};
use crate::writer::{Applied, Completion, WriteOp, WriteRequest, Writer, TICK};

/// Tuning of a [`LogStore`].
#[derive(Debug, Clone)]
pub struct LogStoreOptions {
    /// Capacity of the channel to the writer thread, in requests. A group
    /// that finds it full waits (asynchronously) for room.
    pub write_queue_capacity_requests: usize,
    /// Most requests the writer puts in one transaction (one fsync).
    pub batch_requests_max: usize,
    /// redb's page cache size, in bytes.
    pub cache_size_bytes: usize,
    /// redb "quick repair": each commit also saves the allocator state, with
    /// a two-phase commit (two fsyncs), so that reopening after a crash is
    /// instant instead of walking the whole file. Off by default: one fsync
    /// per commit, and a full repair pass on the first open after a crash.
    pub quick_repair: bool,
    /// Verify every page checksum of the file at open (redb's
    /// `set_check_integrity_on_open`), not only after a crash. Reads the
    /// whole file, so opening takes time proportional to its size; without
    /// it, redb documents that a file altered behind its back may make the
    /// open panic instead of failing. Off by default.
    pub check_integrity_on_open: bool,
    /// Size of the append journal beside the file (`<file>.journal`), in
    /// bytes: batches of appends are made durable there with one write and
    /// one `fdatasync`, and folded into the tables in large transactions
    /// (see `journal.rs`). 0: no journal, every batch is a redb commit (a
    /// journal left by an earlier open is still replayed, then removed).
    pub journal_bytes: u64,
    /// Make the journal's records durable with direct, synchronous writes
    /// (`O_DIRECT | O_DSYNC`) instead of a write and an `fdatasync` each,
    /// where the file system does direct I/O (tmpfs does not: there the
    /// journal writes as without it). See `direct_write.rs`.
    pub journal_direct: bool,
}

/// Default [`LogStoreOptions::write_queue_capacity_requests`].
pub const WRITE_QUEUE_CAPACITY_REQUESTS_DEFAULT: usize = 16 * 1024;
/// Default [`LogStoreOptions::batch_requests_max`].
pub const BATCH_REQUESTS_MAX_DEFAULT: usize = 4 * 1024;
/// Default [`LogStoreOptions::cache_size_bytes`].
pub const CACHE_SIZE_BYTES_DEFAULT: usize = 256 * 1024 * 1024;
/// Default [`LogStoreOptions::journal_bytes`]: about 12,000 appends of a
/// 256-byte message before a fold, and at most this much more of the log
/// held in memory (the groups' tails) until then.
pub const JOURNAL_BYTES_DEFAULT: u64 = 4 * 1024 * 1024;

const _: () = assert!(BATCH_REQUESTS_MAX_DEFAULT >= 1);
const _: () = assert!(BATCH_REQUESTS_MAX_DEFAULT <= WRITE_QUEUE_CAPACITY_REQUESTS_DEFAULT);

impl Default for LogStoreOptions {
    fn default() -> Self {
        LogStoreOptions {
            write_queue_capacity_requests: WRITE_QUEUE_CAPACITY_REQUESTS_DEFAULT,
            batch_requests_max: BATCH_REQUESTS_MAX_DEFAULT,
            cache_size_bytes: CACHE_SIZE_BYTES_DEFAULT,
            quick_repair: false,
            check_integrity_on_open: false,
            journal_bytes: JOURNAL_BYTES_DEFAULT,
            journal_direct: true,
        }
    }
}

/// What [`LogStore::verify`] checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Entry records whose checksum verified.
    pub n_entries: u64,
    /// Metadata records whose checksum verified.
    pub n_meta: u64,
}

/// The Raft log store of a node: every group's log, vote and metadata in one
/// redb database, written by one group-commit thread. Clone it freely.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

type Registry = HashMap<u64, Weak<dyn ErasedGroup>>;

/// The store's first failed commit or fold, once there is one: set by the
/// writer thread when it poisons itself or by the fold thread
/// ([`publish_failure`]), read by [`LogStore::failed`] and
/// [`LogStore::failure`].
pub(crate) type FailureWatch = Arc<watch::Sender<Option<Arc<Error>>>>;

/// Publishes `e` on `watch` unless a failure is there already (the first
/// one stays, whichever thread saw it).
pub(crate) fn publish_failure(watch: &FailureWatch, e: &Arc<Error>) {
    watch.send_if_modified(|first| {
        let new = first.is_none();
        first.get_or_insert_with(|| e.clone());
        new
    });
}

pub(crate) struct Inner {
    /// Read-locked by every reader and by the writer's transactions;
    /// write-locked only to compact the file (`compact.rs`).
    db: SharedDb,
    /// `None` only while dropping.
    sender: Option<mpsc::Sender<WriteRequest>>,
    writer: Option<JoinHandle<()>>,
    stats: Arc<BatchStats>,
    groups: Mutex<Registry>,
    failure: FailureWatch,
}

impl Drop for Inner {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(writer) = self.writer.take() {
            // Never join from the writer thread itself (a completion dropping
            // the last handle); it exits on its own once the channel is empty.
            if writer.thread().id() == std::thread::current().id() {
                return;
            }
            if writer.join().is_err() {
                tracing::error!("store-redb writer thread panicked");
            }
        }
    }
}

impl LogStore {
    /// Opens the database at `path`, creating it if absent, and starts the
    /// writer thread. After an unclean shutdown redb rolls back to the last
    /// fully committed transaction here (see the crate documentation).
    pub fn open(path: impl AsRef<Path>, options: LogStoreOptions) -> Result<LogStore, Error> {
        let path = path.as_ref();
        let db = Database::builder()
            .set_cache_size(options.cache_size_bytes)
            .set_check_integrity_on_open(options.check_integrity_on_open)
            .create(path)?;
        // Opened after the database, whose file lock keeps a second store
        // of this path away from the journal too.
        let journal_path = journal_path(path);
        let journal: Option<Box<dyn redb::StorageBackend>> =
            if options.journal_bytes > 0 || journal_path.exists() {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&journal_path)
                    .map_err(Error::Journal)?;
                Some(Box::new(redb::backends::FileBackend::new(file)?))
            } else {
                None
            };
        LogStore::start(db, Some(path.to_path_buf()), journal, options)
    }

    /// Opens (or creates) the database on `backend` and its append journal
    /// on `journal` (`None`: no journal, whatever the options say): for
    /// crash tests that lose what was not synced in both files.
    pub fn open_with_backends(
        backend: impl redb::StorageBackend,
        journal: Option<Box<dyn redb::StorageBackend>>,
        options: LogStoreOptions,
    ) -> Result<LogStore, Error> {
        let db = Database::builder()
            .set_cache_size(options.cache_size_bytes)
            .set_check_integrity_on_open(options.check_integrity_on_open)
            .create_with_backend(backend)?;
        LogStore::start(db, None, journal, options)
    }

    /// Opens (or creates) the database on `backend` instead of a file: for
    /// tests that make the storage fail (an fsync or a write that returns
    /// an error) or forget what was not synced.
    pub fn open_with_backend(
        backend: impl redb::StorageBackend,
        options: LogStoreOptions,
    ) -> Result<LogStore, Error> {
        LogStore::open_with_backends(backend, None, options)
    }

    /// Creates the tables of an opened database, folds what its journal
    /// holds, and starts its writer.
    fn start(
        db: Database,
        path: Option<PathBuf>,
        journal: Option<Box<dyn redb::StorageBackend>>,
        options: LogStoreOptions,
    ) -> Result<LogStore, Error> {
        let folded = init_tables(&db)?;
        let journal = match journal {
            Some(file) => recover_journal(
                &db,
                file,
                options.journal_bytes,
                folded,
                options.quick_repair,
            )?,
            None => None,
        };
        let journal = match (journal, &path) {
            (Some(journal), Some(path)) if options.journal_direct => {
                Some(write_directly(journal, &journal_path(path)))
            }
            (None, Some(path)) => {
                remove_journal(path)?;
                None
            }
            (journal, _) => journal,
        };
        let db = Arc::new(RwLock::new(db));
        let stats = Arc::new(BatchStats::default());
        let (sender, receiver) = mpsc::channel(options.write_queue_capacity_requests.max(1));
        let failure: FailureWatch = Arc::new(watch::Sender::new(None));
        let writer = Writer::spawn(
            db.clone(),
            path,
            receiver,
            stats.clone(),
            options.batch_requests_max,
            options.quick_repair,
            failure.clone(),
            journal,
        )?;
        spawn_ticker(sender.downgrade())?;
        Ok(LogStore {
            inner: Arc::new(Inner {
                db,
                sender: Some(sender),
                writer: Some(writer),
                stats,
                groups: Mutex::new(HashMap::new()),
                failure,
            }),
        })
    }

    /// Opens the log of Raft group `group_id` (creating nothing on disk until
    /// it is written), as an openraft log store. A group has at most one live
    /// `GroupLogStore` at a time: a second call while the first handle lives
    /// fails with [`Error::GroupOpen`].
    pub fn group<C>(&self, group_id: u64) -> Result<GroupLogStore<C>, Error>
    where
        C: RaftTypeConfig,
        C::Entry: Clone + Serialize + DeserializeOwned,
    {
        let mut registry = self
            .inner
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = registry.get(&group_id).and_then(Weak::upgrade) {
            let shared = live
                .into_any()
                .downcast::<GroupShared<C>>()
                .map_err(|_| Error::GroupTypeMismatch { group_id })?;
            return GroupLogStore::claim(self.clone(), shared);
        }
        let shared = Arc::new(GroupShared::<C>::load(&self.db(), group_id)?);
        let erased: Arc<dyn ErasedGroup> = shared.clone();
        registry.insert(group_id, Arc::downgrade(&erased));
        // Forget groups whose state is gone; at doubling sizes only, so the
        // sweep costs O(1) amortized per insert.
        if registry.len() > 64 && registry.len().is_power_of_two() {
            registry.retain(|_, w| w.strong_count() > 0);
        }
        GroupLogStore::claim(self.clone(), shared)
    }

    /// The ids of the groups with anything on disk (an entry or a metadata
    /// row), in ascending order: the groups to recover at start-up (the
    /// journal was folded at open). Writes not yet committed, and appends
    /// in the journal not yet folded, are not seen.
    pub fn groups(&self) -> Result<Vec<u64>, Error> {
        let txn = self.db().begin_read()?;
        let mut ids = BTreeSet::new();
        let meta = txn.open_table(META)?;
        for row in meta.range::<(u64, u8)>(..)? {
            let (key, _) = row?;
            ids.insert(key.value().0);
        }
        // One seek per group: jump past each group's entries.
        let entries = txn.open_table(ENTRIES)?;
        let mut from = 0u64;
        loop {
            let Some(row) = entries.range((from, 0)..)?.next() else {
                break;
            };
            let (key, _) = row?;
            let group_id = key.value().0;
            ids.insert(group_id);
            match group_id.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        Ok(ids.into_iter().collect())
    }

    /// Deletes every entry and metadata row of `group_id`, durably. Fails
    /// with [`Error::GroupOpen`] while a [`GroupLogStore`] of the group
    /// lives.
    pub async fn remove_group(&self, group_id: u64) -> Result<(), Error> {
        {
            let mut registry = self
                .inner
                .groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(live) = registry.get(&group_id).and_then(Weak::upgrade) {
                if live.is_claimed() {
                    return Err(Error::GroupOpen { group_id });
                }
            }
            registry.remove(&group_id);
        }
        self.submit_and_wait(WriteOp::RemoveGroup { group_id }, || {})
            .await
    }

    /// The error of the commit that poisoned the writer, if one failed:
    /// from then on the store refuses every write until it is reopened.
    pub fn failure(&self) -> Option<Arc<Error>> {
        self.inner.failure.borrow().clone()
    }

    /// Resolves with the error of the first failed commit (at once if one
    /// already failed). A failed commit (an I/O error, a full disk, a failed
    /// fsync) stops every Raft group writing here, since their in-memory
    /// state has moved ahead of the disk; the process that owns the store
    /// must then reopen it or stop (a library does not exit the process:
    /// it hands the error to its owner through this future). Never resolves
    /// when the store closes without a failure. The future holds no handle
    /// of the store, so awaiting it does not keep the file open.
    pub fn failed(&self) -> impl std::future::Future<Output = Arc<Error>> + Send + 'static {
        let mut failure = self.inner.failure.subscribe();
        async move {
            loop {
                if let Some(error) = failure.borrow_and_update().clone() {
                    return error;
                }
                if failure.changed().await.is_err() {
                    // The store closed without a failure.
                    return std::future::pending().await;
                }
            }
        }
    }

    /// Counters of the group-commit writer.
    pub fn stats(&self) -> BatchStatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Reads every record of the file and checks its CRC32C (without
    /// decoding payloads). Stops at the first bad record and returns its
    /// error.
    pub fn verify(&self) -> Result<VerifyReport, Error> {
        let txn = self.db().begin_read()?;
        let mut report = VerifyReport::default();
        let entries = txn.open_table(ENTRIES)?;
        for row in entries.range::<(u64, u64)>(..)? {
            let (key, value) = row?;
            let (group_id, index) = key.value();
            if index == COMMITTED_INDEX {
                let key = RecordKey::Meta {
                    group_id,
                    kind: Ok(MetaKind::Committed),
                };
                record::verify(key, value.value())?;
                report.n_meta += 1;
            } else {
                record::verify(RecordKey::Entry { group_id, index }, value.value())?;
                report.n_entries += 1;
            }
        }
        let meta = txn.open_table(META)?;
        for row in meta.range::<(u64, u8)>(..)? {
            let (key, value) = row?;
            let (group_id, kind) = key.value();
            record::verify(RecordKey::meta(group_id, kind), value.value())?;
            report.n_meta += 1;
        }
        Ok(report)
    }

    /// The database, read-locked (the lock only excludes a compaction).
    pub(crate) fn db(&self) -> RwLockReadGuard<'_, Database> {
        self.inner.db.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests queued for the writer thread and not yet taken by it. A
    /// slot is freed when the writer receives its request, so 0 after a
    /// send means the writer holds it (tests use this to know the writer
    /// has reached `begin_write`).
    #[cfg(test)]
    pub(crate) fn queued_requests(&self) -> usize {
        self.inner
            .sender
            .as_ref()
            .map_or(0, |s| s.max_capacity() - s.capacity())
    }

    /// Reserves a slot in the writer's queue, waiting (asynchronously) while
    /// it is full. Callers reserve BEFORE they change any in-memory state and
    /// then send without awaiting, so a future dropped at an await point
    /// leaves no staged change without its queued write.
    pub(crate) async fn reserve(&self) -> Result<WritePermit<'_>, Error> {
        let sender = self.inner.sender.as_ref().ok_or(Error::WriterStopped)?;
        sender
            .reserve()
            .await
            .map(WritePermit)
            .map_err(|_| Error::WriterStopped)
    }

    /// Queues `op` and waits until it is durable.
    pub(crate) async fn submit_and_wait(
        &self,
        op: WriteOp,
        on_durable: impl FnOnce() + Send + 'static,
    ) -> Result<(), Error> {
        self.reserve().await?.send_and_wait(op, on_durable).await
    }
}

/// A reserved slot in the writer's queue.
pub(crate) struct WritePermit<'a>(mpsc::Permit<'a, WriteRequest>);

impl WritePermit<'_> {
    /// Queues `op`; `completion` runs on the writer thread after its commit.
    pub(crate) fn send(self, op: WriteOp, completion: Option<Completion>) {
        self.0.send(WriteRequest {
            op,
            completion,
            applied: None,
        });
    }

    /// Queues the append `op`: `completion` runs on the writer thread once
    /// it is durable, `applied` once it is in the tables (see `writer.rs`).
    pub(crate) fn send_append(self, op: WriteOp, applied: Applied, completion: Completion) {
        self.0.send(WriteRequest {
            op,
            completion: Some(completion),
            applied: Some(applied),
        });
    }

    /// Queues `op` and returns a future that resolves once it is durable.
    /// `on_durable` runs on the writer thread right after the commit,
    /// whether or not the future is still awaited.
    pub(crate) fn send_and_wait(
        self,
        op: WriteOp,
        on_durable: impl FnOnce() + Send + 'static,
    ) -> impl std::future::Future<Output = Result<(), Error>> {
        let (tx, rx) = oneshot::channel();
        let completion: Completion = Box::new(move |result: Result<(), Error>| {
            if result.is_ok() {
                on_durable();
            }
            // The waiter may have gone away (its future dropped): nothing to tell.
            let _ = tx.send(result);
        });
        self.send(op, Some(completion));
        async move { rx.await.map_err(|_| Error::WriterStopped)? }
    }
}

/// Wakes the writer every [`TICK`] with a [`WriteOp::Tick`] while the
/// store lives (it holds only a weak sender, so it never keeps the writer
/// alive), for the idle compaction check.
fn spawn_ticker(sender: mpsc::WeakSender<WriteRequest>) -> Result<(), Error> {
    std::thread::Builder::new()
        .name("store-redb-tick".into())
        .spawn(move || loop {
            // A periodic wake-up: there is no event for "has been idle".
            std::thread::sleep(TICK);
            let Some(sender) = sender.upgrade() else {
                return;
            };
            // A full queue means a busy writer: nothing to look at then.
            let _ = sender.try_send(WriteRequest {
                op: WriteOp::Tick,
                completion: None,
                applied: None,
            });
        })
        .map(|_| ())
        .map_err(Error::WriterSpawn)
}

/// The journal of the database file at `path`.
pub(crate) fn journal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

/// Removes the journal of a store opened without one (after its appends
/// were folded).
fn remove_journal(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(journal_path(path)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::Journal(e)),
    }
}

/// The journal, writing its records through the file at `path` opened for
/// direct, synchronous writes where its file system does them; as it was
/// otherwise (only slower, so a refusal is logged, not an error).
fn write_directly(mut journal: Journal, path: &Path) -> Journal {
    match DirectWriter::open(path) {
        Ok(Some(direct)) => {
            if journal.write_directly(direct) {
                tracing::debug!("store-redb: journal records written with O_DIRECT | O_DSYNC");
            } else {
                tracing::info!(
                    "store-redb: the journal's regions do not start on a block; a write and an fdatasync per record"
                );
            }
        }
        Ok(None) => tracing::info!(
            path = %path.display(),
            "store-redb: no direct I/O for the journal here; a write and an fdatasync per record"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "store-redb: cannot open the journal for direct writes; a write and an fdatasync per record"
        ),
    }
    journal
}

/// Opens the journal on `file`, folds the appends it holds into the tables
/// in one durable transaction, and returns it ready to write (`None` when
/// the store runs without one: `capacity` 0).
fn recover_journal(
    db: &Database,
    file: Box<dyn redb::StorageBackend>,
    capacity: u64,
    folded: u64,
    quick_repair: bool,
) -> Result<Option<Journal>, Error> {
    let opened = Journal::open(file, folded)?;
    // Folded even when it holds no append, so that no later open reads
    // the generation again.
    if let Some(generation) = opened.generation {
        let n_appends = opened.replay.len();
        let ops: Vec<WriteOp> = opened.replay.into_iter().map(WriteOp::from).collect();
        fold_generation(db, &ops, generation, quick_repair)?;
        tracing::info!(
            appends = n_appends,
            generation,
            "store-redb: replayed the append journal into the tables"
        );
    }
    if capacity == 0 {
        return Ok(None);
    }
    opened.journal.prepare(capacity).map(Some)
}
