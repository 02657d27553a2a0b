//! The group-commit writer: one std thread per [`LogStore`](crate::LogStore)
//! that owns every write to the database.
//!
//! Protocol:
//! 1. A group handle turns each write (append, vote, committed, truncate,
//!    purge, group removal) into a [`WriteRequest`]: a [`WriteOp`] with its
//!    records already framed (encoding and checksumming run on the caller's
//!    task, not here) and an optional [`Completion`]. It sends the request
//!    on the store's bounded channel, so one group's requests reach the
//!    writer in the order the group issued them.
//! 2. The writer blocks for one request, then drains whatever else is queued
//!    (at most `batch_requests_max` requests) without waiting.
//! 3. It applies the whole batch, in arrival order, in ONE redb write
//!    transaction with [`Durability::Immediate`] and commits it: one fsync
//!    for every group in the batch.
//! 4. Only after the commit returns does it run the completions, in arrival
//!    order: append callbacks (`LogFlushed::log_io_completed`, after the
//!    group's in-memory tail drops the now-durable entries) and the oneshots
//!    of awaited requests.
//!
//! While one batch commits, new requests queue in the channel and form the
//! next batch, so the batch size grows with load and an idle store commits
//! one request at a time.
//!
//! A purge's commit writes only the group's last-purged id; the purged rows
//! are deleted a bounded step per later commit (`purge_backlog.rs`), and a
//! quiet writer with a backlog commits steps of it until it is empty.
//!
//! The writer also holds a read transaction of the last commit, so that the
//! pages each commit frees are released inside the next commit instead of
//! in a post-commit pass of redb (see [`Writer::repin`]).
//!
//! A failed commit fails every request of its batch and poisons the writer:
//! every later request fails with the same error until the store is
//! reopened, because the groups' in-memory state (tails, last log ids) has
//! moved ahead of a disk that did not follow. The first failure is also
//! published on the store's failure watch ([`FailureWatch`]), so the owner
//! of the process can stop it (see `LogStore::failed`).
//!
//! Shutdown: the thread exits when every sender is dropped (the last
//! `LogStore` clone), after committing what was queued.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use redb::{Durability, ReadTransaction, ReadableDatabase, Table, WriteTransaction};
use tokio::sync::mpsc;

use crate::compact::{CompactionPolicy, SharedDb};
use crate::error::Error;
use crate::purge_backlog::PurgeBacklog;
use crate::stats::{BatchStats, CommitTally};
use crate::store::FailureWatch;
use crate::tables::{MetaKind, COMMITTED_INDEX, ENTRIES, META};

/// A commit at least this long is logged as a warning.
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_millis(50);

/// One write, with its records framed.
pub(crate) enum WriteOp {
    /// Insert entries `(index, framed record)` of one group, after the
    /// group's committed log id record if there is one (the last
    /// `save_committed` not yet written rides with the next append, into
    /// the entries table at `COMMITTED_INDEX`).
    Append {
        group_id: u64,
        records: Vec<(u64, Vec<u8>)>,
        committed: Option<Vec<u8>>,
    },
    /// Insert or replace one metadata row.
    PutMeta {
        group_id: u64,
        kind: MetaKind,
        record: Vec<u8>,
    },
    /// Delete the group's entries at `since` and after.
    Truncate { group_id: u64, since: u64 },
    /// Delete the group's entries up to and including `through` and store the
    /// last-purged log id `record`, atomically.
    Purge {
        group_id: u64,
        through: u64,
        record: Vec<u8>,
    },
    /// Delete every entry and metadata row of the group.
    RemoveGroup { group_id: u64 },
    /// Nothing to write: wakes the writer now and then, so that an idle
    /// store can see whether its file wants compacting (`compact.rs`).
    Tick,
}

/// How long the store must have committed nothing before it compacts.
const IDLE_BEFORE_COMPACTION: std::time::Duration = std::time::Duration::from_secs(5);
/// How often an idle writer is woken to look (see [`WriteOp::Tick`]).
pub(crate) const TICK: std::time::Duration = std::time::Duration::from_secs(5);

/// Run by the writer thread once the request's transaction has committed
/// (`Ok`) or failed (`Err`). Must be quick and must not block: it runs on
/// the writer thread between commits.
pub(crate) type Completion = Box<dyn FnOnce(Result<(), Error>) + Send>;

/// A [`WriteOp`] and who to tell when it is durable.
pub(crate) struct WriteRequest {
    pub(crate) op: WriteOp,
    pub(crate) completion: Option<Completion>,
}

/// The writer thread's state.
pub(crate) struct Writer {
    db: SharedDb,
    /// When the last transaction committed (or the writer started).
    last_commit: Instant,
    /// The database file, to compact it (`None` for a custom backend).
    path: Option<PathBuf>,
    compaction: CompactionPolicy,
    requests: mpsc::Receiver<WriteRequest>,
    stats: Arc<BatchStats>,
    batch_requests_max: usize,
    quick_repair: bool,
    failed: Option<Arc<Error>>,
    /// Where the first failure is published for `LogStore::failed`.
    failure: FailureWatch,
    /// A read transaction of the last commit, held until the next one
    /// begins: see [`Writer::repin`].
    pin: Option<ReadTransaction>,
    /// Purged rows still in the file, deleted a step per commit
    /// (`purge_backlog.rs`).
    backlog: PurgeBacklog,
}

impl Writer {
    /// Starts the writer thread.
    pub(crate) fn spawn(
        db: SharedDb,
        path: Option<PathBuf>,
        requests: mpsc::Receiver<WriteRequest>,
        stats: Arc<BatchStats>,
        batch_requests_max: usize,
        quick_repair: bool,
        failure: FailureWatch,
    ) -> Result<JoinHandle<()>, Error> {
        let writer = Writer {
            db,
            last_commit: Instant::now(),
            path,
            compaction: CompactionPolicy::new(),
            requests,
            stats,
            batch_requests_max: batch_requests_max.max(1),
            quick_repair,
            failed: None,
            failure,
            pin: None,
            backlog: PurgeBacklog::default(),
        };
        std::thread::Builder::new()
            .name("store-redb-writer".into())
            .spawn(move || writer.run())
            .map_err(Error::WriterSpawn)
    }

    fn run(mut self) {
        let mut batch: Vec<WriteRequest> = Vec::with_capacity(self.batch_requests_max);
        loop {
            // With purged rows left to delete, a quiet store commits steps
            // of them instead of sleeping (an empty batch).
            let may_sleep = self.backlog.is_empty() || self.failed.is_some();
            let first = if may_sleep {
                self.requests.blocking_recv()
            } else {
                match self.requests.try_recv() {
                    Ok(request) => Some(request),
                    Err(mpsc::error::TryRecvError::Empty) => None,
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                }
            };
            match first {
                Some(request) => batch.push(request),
                None if may_sleep => break,
                None => {}
            }
            while batch.len() < self.batch_requests_max {
                match self.requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            if !batch.is_empty()
                && batch
                    .iter()
                    .all(|request| matches!(request.op, WriteOp::Tick))
            {
                batch.clear();
                // Compact only a store that has been quiet for a while, so
                // a compaction never stalls a busy log.
                if self.failed.is_none() && self.last_commit.elapsed() >= IDLE_BEFORE_COMPACTION {
                    self.maybe_compact();
                }
                continue;
            }
            let result = self.commit_or_poison(&batch);
            self.last_commit = Instant::now();
            for request in batch.drain(..) {
                if let Some(done) = request.completion {
                    done(result.clone().map_err(Error::Write));
                }
            }
        }
        tracing::debug!("store-redb writer: all senders gone, exiting");
    }

    fn commit_or_poison(&mut self, batch: &[WriteRequest]) -> Result<(), Arc<Error>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let started = Instant::now();
        self.repin();
        match self.commit(batch) {
            Ok(tally) => {
                let took = started.elapsed();
                // A commit of backlog rows alone is not a client's commit.
                if !batch.is_empty() {
                    self.stats.record_commit(tally, took);
                }
                if took >= SLOW_COMMIT {
                    // Every append of the batch (and of the batches queued
                    // behind it) waited this long: worth a line in the log.
                    tracing::warn!(
                        took_ms = took.as_millis() as u64,
                        requests = tally.requests,
                        records = tally.records,
                        bytes = tally.bytes,
                        "store-redb: slow commit"
                    );
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, n_requests = batch.len(), "store-redb commit failed; refusing further writes");
                Err(self.poison(e))
            }
        }
    }

    /// Refuse every later write after `e`, and publish it.
    fn poison(&mut self, e: Error) -> Arc<Error> {
        self.stats.record_failure();
        let e = Arc::new(e);
        self.failed = Some(e.clone());
        // Stored whether or not anyone watches yet: a watcher that
        // subscribes later sees it at once.
        self.failure.send_replace(Some(e.clone()));
        e
    }

    /// Compacts the file if most of it is free (`compact.rs`). A failure
    /// poisons the writer like a failed commit.
    fn maybe_compact(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        // redb compacts only with no transaction open.
        self.pin = None;
        match self.compaction.maybe_compact(&self.db, &path) {
            Ok(None) => {}
            Ok(Some(done)) => tracing::info!(
                file_bytes_before = done.file_bytes_before,
                file_bytes_after = done.file_bytes_after,
                took_ms = done.took.as_millis() as u64,
                "store-redb: compacted the log file"
            ),
            Err(e) => {
                tracing::error!(error = %e, "store-redb compaction failed; refusing further writes");
                self.poison(e);
            }
        }
    }

    /// Replaces the held read transaction by one of the last commit.
    ///
    /// Why: every commit copies on write the pages it changes and records
    /// the old ones as freed by it. Left alone, redb frees them right after
    /// the commit returns, in a post-commit pass that rewrites its system
    /// tree in a second (non-durable) commit: about a quarter of the CPU of a
    /// small commit. A reader of the last commit keeps the pages that the
    /// next commit frees alive until the commit after it, which then frees
    /// them inside its own transaction (`process_freed_pages`, before its
    /// fsync) and leaves the post-commit pass nothing to do. Cost: the file
    /// keeps one commit's worth of pages more. Durability is unchanged (the
    /// pin only delays the reuse of pages no live tree references).
    fn repin(&mut self) {
        self.pin = None;
        let db = self.db.read().unwrap_or_else(PoisonError::into_inner);
        match db.begin_read() {
            Ok(txn) => self.pin = Some(txn),
            // Only an optimization: commit without it.
            Err(e) => {
                tracing::warn!(error = %e, "store-redb: cannot begin the pinning read transaction")
            }
        }
    }

    /// Applies `batch` in one write transaction, plus a step of the purge
    /// backlog, and commits it durably.
    fn commit(&mut self, batch: &[WriteRequest]) -> Result<CommitTally, Error> {
        let db = self.db.read().unwrap_or_else(PoisonError::into_inner);
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.set_quick_repair(self.quick_repair);
        let mut tally = CommitTally {
            requests: batch.len() as u64,
            ..CommitTally::default()
        };
        {
            let mut tables = Tables {
                txn: &txn,
                entries: None,
                meta: None,
            };
            for request in batch {
                apply(&mut tables, &request.op, &mut tally, &mut self.backlog)?;
            }
            if !self.backlog.is_empty() {
                tally.records += self.backlog.step(tables.entries()?)?;
            }
        }
        txn.commit()?;
        Ok(tally)
    }
}

type EntriesTable<'t> = Table<'t, (u64, u64), &'static [u8]>;
type MetaTable<'t> = Table<'t, (u64, u8), &'static [u8]>;

/// The tables of one write transaction, each opened on first use: a batch
/// of appends does not open `raft_meta` (opening a table costs a lookup and
/// decode of its definition).
struct Tables<'t> {
    txn: &'t WriteTransaction,
    entries: Option<EntriesTable<'t>>,
    meta: Option<MetaTable<'t>>,
}

impl<'t> Tables<'t> {
    fn entries(&mut self) -> Result<&mut EntriesTable<'t>, Error> {
        match &mut self.entries {
            Some(table) => Ok(table),
            slot => Ok(slot.insert(self.txn.open_table(ENTRIES)?)),
        }
    }

    fn meta(&mut self) -> Result<&mut MetaTable<'t>, Error> {
        match &mut self.meta {
            Some(table) => Ok(table),
            slot => Ok(slot.insert(self.txn.open_table(META)?)),
        }
    }
}

fn apply(
    tables: &mut Tables<'_>,
    op: &WriteOp,
    tally: &mut CommitTally,
    backlog: &mut PurgeBacklog,
) -> Result<(), Error> {
    match op {
        WriteOp::Append {
            group_id,
            records,
            committed,
        } => {
            // In the entries table, right after the group's entries: the
            // leaf this append dirties anyway (`tables.rs`).
            if let Some(record) = committed {
                tables
                    .entries()?
                    .insert((*group_id, COMMITTED_INDEX), record.as_slice())?;
                tally.records += 1;
                tally.bytes += record.len() as u64;
            }
            for (index, record) in records {
                tables
                    .entries()?
                    .insert((*group_id, *index), record.as_slice())?;
                tally.bytes += record.len() as u64;
            }
            tally.entries += records.len() as u64;
            tally.records += records.len() as u64;
        }
        WriteOp::PutMeta {
            group_id,
            kind,
            record,
        } => {
            tables
                .meta()?
                .insert(kind.key(*group_id), record.as_slice())?;
            tally.records += 1;
            tally.bytes += record.len() as u64;
        }
        WriteOp::Truncate { group_id, since } => {
            let mut n_deleted = 0u64;
            tables.entries()?.retain_in(
                (*group_id, *since)..(*group_id, COMMITTED_INDEX),
                |_, _| {
                    n_deleted += 1;
                    false
                },
            )?;
            tally.records += n_deleted;
        }
        WriteOp::Purge {
            group_id,
            through,
            record,
        } => {
            // The rows go a step per commit (`purge_backlog.rs`); this
            // commit makes the purge durable.
            backlog.add(*group_id, *through);
            tables
                .meta()?
                .insert(MetaKind::LastPurged.key(*group_id), record.as_slice())?;
            tally.records += 1;
            tally.bytes += record.len() as u64;
        }
        WriteOp::Tick => {}
        WriteOp::RemoveGroup { group_id } => {
            backlog.forget(*group_id);
            let mut n_deleted = 0u64;
            tables.entries()?.retain_in(
                (*group_id, 0)..=(*group_id, COMMITTED_INDEX),
                |_, _| {
                    n_deleted += 1;
                    false
                },
            )?;
            for kind in MetaKind::ALL {
                if tables.meta()?.remove(kind.key(*group_id))?.is_some() {
                    n_deleted += 1;
                }
            }
            tally.records += n_deleted;
        }
    }
    Ok(())
}
