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
//! 3. A batch of appends alone, with a journal (`journal.rs`), is written
//!    to the journal as one record and synced: one write and one fsync for
//!    every group in the batch. Any other batch is applied, in arrival
//!    order, in ONE redb write transaction with [`Durability::Immediate`],
//!    after the appends the journal holds (the fold), and committed: one
//!    fsync again.
//! 4. Only after the sync or commit returns does it run the completions, in
//!    arrival order: append callbacks (`LogFlushed::log_io_completed`) and
//!    the oneshots of awaited requests. An append's `applied` (the group's
//!    tail letting go of the entries, which reads then find in the tables)
//!    runs once the entries are in the tables: before its completion after
//!    a commit, at the fold after a journal write.
//!
//! When a record no longer fits in the journal's region, the region's
//! generation goes to the fold thread (`fold.rs`) and the writer goes on
//! in the other region; it waits for that fold before it fills the other
//! region too and before any redb commit. The journal is also folded, on
//! the writer thread, inside the commit of a batch that holds anything but
//! appends (a vote, a truncate, a purge: they go through the tables, after
//! the appends before them), when a tick (every [`TICK`]) finds the store
//! quiet for [`FOLD_WHEN_QUIET`], and when the writer exits.
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
//! A failed commit, journal write or fold fails every request of its batch
//! (a fold's: the batch that waited for it) and poisons the writer:
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

use redb::{Durability, ReadTransaction, ReadableDatabase};
use tokio::sync::mpsc;

use crate::apply::{apply, Tables};
use crate::compact::{CompactionPolicy, SharedDb};
use crate::error::Error;
use crate::fold::Folder;
use crate::journal::Journal;
use crate::purge_backlog::PurgeBacklog;
use crate::stats::{BatchStats, CommitTally};
use crate::store::{publish_failure, FailureWatch};
use crate::tables::{MetaKind, FORMAT, JOURNAL_FOLDED_KEY};

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
/// How long the store must have written nothing before a tick folds the
/// journal: a quiet store's reads then come from the tables and its
/// groups' tails are empty.
const FOLD_WHEN_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// Run by the writer thread once the request's transaction has committed
/// (`Ok`) or failed (`Err`). Must be quick and must not block: it runs on
/// the writer thread between commits.
pub(crate) type Completion = Box<dyn FnOnce(Result<(), Error>) + Send>;

/// Run by the writer thread once an append's records are in the tables (not
/// only durable in the journal). Must be quick and must not block.
pub(crate) type Applied = Box<dyn FnOnce() + Send>;

/// A [`WriteOp`], who to tell when it is durable and, for an append, what
/// to run once it is in the tables.
pub(crate) struct WriteRequest {
    pub(crate) op: WriteOp,
    pub(crate) completion: Option<Completion>,
    pub(crate) applied: Option<Applied>,
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
    /// The append journal, if the store has one, and its fold thread.
    journal: Option<Journal>,
    folder: Option<Folder>,
    /// The appends written in the journal's current generation, in order,
    /// and their `applied` callbacks.
    journaled: Vec<WriteOp>,
    journaled_applied: Vec<Applied>,
}

/// Whether a redb commit also folds the journal's current generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fold {
    Yes,
    /// A step of the purge backlog alone.
    No,
}

/// One append as [`Journal::write`] takes it: group id, entry records,
/// committed record.
type JournalAppendRef<'a> = crate::journal_record::AppendRef<'a>;

impl Writer {
    /// Starts the writer thread.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        db: SharedDb,
        path: Option<PathBuf>,
        requests: mpsc::Receiver<WriteRequest>,
        stats: Arc<BatchStats>,
        batch_requests_max: usize,
        quick_repair: bool,
        failure: FailureWatch,
        journal: Option<Journal>,
    ) -> Result<JoinHandle<()>, Error> {
        let folder = match journal {
            Some(_) => Some(Folder::spawn(
                db.clone(),
                stats.clone(),
                quick_repair,
                failure.clone(),
            )?),
            None => None,
        };
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
            journal,
            folder,
            journaled: Vec::new(),
            journaled_applied: Vec::new(),
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
                let quiet_for = self.last_commit.elapsed();
                if self.failed.is_none()
                    && !self.journaled.is_empty()
                    && quiet_for >= FOLD_WHEN_QUIET
                {
                    // An empty batch: the fold alone.
                    let _ = self.commit_or_poison(&[], Fold::Yes);
                }
                // Compact only a store that has been quiet for a while, so
                // a compaction never stalls a busy log.
                if self.failed.is_none() && quiet_for >= IDLE_BEFORE_COMPACTION {
                    self.maybe_compact();
                }
                continue;
            }
            let (result, journaled) = match self.journal_or_poison(&batch) {
                Ok(true) => (Ok(()), true),
                // An empty batch is a step of the purge backlog alone: it
                // has nothing to order after the journal's appends.
                Ok(false) if batch.is_empty() => (self.commit_or_poison(&batch, Fold::No), false),
                Ok(false) => (self.commit_or_poison(&batch, Fold::Yes), false),
                Err(e) => (Err(e), false),
            };
            self.last_commit = Instant::now();
            for request in batch.drain(..) {
                if result.is_ok() {
                    if journaled {
                        self.journaled.push(request.op);
                        self.journaled_applied.extend(request.applied);
                    } else if let Some(applied) = request.applied {
                        applied();
                    }
                }
                if let Some(done) = request.completion {
                    done(result.clone().map_err(Error::Write));
                }
            }
        }
        // What the journal holds goes into the tables before the thread
        // ends: a store closed cleanly leaves nothing to replay.
        if self.failed.is_none() {
            if self.journaled.is_empty() {
                let _ = self.wait_fold();
            } else {
                let _ = self.commit_or_poison(&[], Fold::Yes);
            }
        }
        tracing::debug!("store-redb writer: all senders gone, exiting");
    }

    /// Writes `batch` to the journal if it holds appends only and fits.
    /// When the region is full, hands its generation to the fold thread
    /// and writes in the other region. Returns whether it wrote; a failed
    /// write, sync or fold poisons the writer.
    fn journal_or_poison(&mut self, batch: &[WriteRequest]) -> Result<bool, Arc<Error>> {
        if self.journal.is_none() || self.failed.is_some() || batch.is_empty() {
            return Ok(false);
        }
        let mut tally = CommitTally {
            requests: batch.len() as u64,
            ..CommitTally::default()
        };
        let mut appends = Vec::with_capacity(batch.len());
        for request in batch {
            match &request.op {
                WriteOp::Append {
                    group_id,
                    records,
                    committed,
                } => {
                    let n_committed = u64::from(committed.is_some());
                    tally.entries += records.len() as u64;
                    tally.records += records.len() as u64 + n_committed;
                    tally.bytes += records.iter().map(|(_, r)| r.len() as u64).sum::<u64>()
                        + committed.as_ref().map_or(0, |c| c.len() as u64);
                    appends.push((*group_id, records.as_slice(), committed.as_deref()));
                }
                WriteOp::Tick => {}
                _ => return Ok(false),
            }
        }
        let started = Instant::now();
        let mut written = self.journal_write(&appends)?;
        if !written && !self.journaled.is_empty() {
            self.wait_fold()?;
            self.start_fold()?;
            written = self.journal_write(&appends)?;
        }
        if written {
            self.stats.record_commit(tally, started.elapsed());
        }
        Ok(written)
    }

    /// One record of `appends` into the journal; see [`Journal::write`].
    fn journal_write(&mut self, appends: &[JournalAppendRef<'_>]) -> Result<bool, Arc<Error>> {
        let Some(journal) = self.journal.as_mut() else {
            return Ok(false);
        };
        match journal.write(appends.iter().copied()) {
            Ok(written) => {
                if written && journal.writes_directly() {
                    self.stats.record_direct_write();
                }
                Ok(written)
            }
            Err(e) => {
                tracing::error!(error = %e, n_appends = appends.len(), "store-redb journal write failed; refusing further writes");
                Err(self.poison(e))
            }
        }
    }

    /// Hands the generation being written to the fold thread and starts
    /// the next one in the other region (whose fold the caller waited
    /// for).
    fn start_fold(&mut self) -> Result<(), Arc<Error>> {
        let (Some(journal), Some(folder)) = (self.journal.as_mut(), self.folder.as_mut()) else {
            return Ok(());
        };
        let ops = std::mem::take(&mut self.journaled);
        let applied = std::mem::take(&mut self.journaled_applied);
        if let Err(e) = folder.start(journal.generation(), ops, applied) {
            return Err(self.poison(e));
        }
        journal.next_generation();
        Ok(())
    }

    /// Waits for the fold in flight, if any; a failed fold poisons the
    /// writer.
    fn wait_fold(&mut self) -> Result<(), Arc<Error>> {
        let Some(folder) = self.folder.as_mut() else {
            return Ok(());
        };
        // The fold thread logged and published a failure already.
        folder.wait().map_err(|e| self.poison_shared(e))
    }

    fn commit_or_poison(&mut self, batch: &[WriteRequest], fold: Fold) -> Result<(), Arc<Error>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        // The fold in flight commits first: its appends came before.
        self.wait_fold()?;
        let started = Instant::now();
        self.repin();
        match self.commit(batch, fold) {
            Ok(tally) => {
                if fold == Fold::Yes && !self.journaled.is_empty() {
                    // Folded: the tails may let go of the journaled entries.
                    self.stats.record_fold();
                    self.journaled.clear();
                    for applied in self.journaled_applied.drain(..) {
                        applied();
                    }
                    if let Some(journal) = self.journal.as_mut() {
                        journal.next_generation();
                    }
                }
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
        self.poison_shared(Arc::new(e))
    }

    fn poison_shared(&mut self, e: Arc<Error>) -> Arc<Error> {
        self.stats.record_failure();
        self.failed = Some(e.clone());
        // Stored whether or not anyone watches yet: a watcher that
        // subscribes later sees it at once. The first failure stays.
        publish_failure(&self.failure, &e);
        e
    }

    /// Compacts the file if most of it is free (`compact.rs`). A failure
    /// poisons the writer like a failed commit.
    fn maybe_compact(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        // redb compacts only with no transaction open.
        if self.wait_fold().is_err() {
            return;
        }
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
    fn commit(&mut self, batch: &[WriteRequest], fold: Fold) -> Result<CommitTally, Error> {
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
            // The fold: the journal's appends came before this batch.
            if let (Fold::Yes, false, Some(journal)) =
                (fold, self.journaled.is_empty(), &self.journal)
            {
                let mut folded = CommitTally::default();
                for op in &self.journaled {
                    apply(&mut tables, op, &mut folded, &mut self.backlog)?;
                }
                txn.open_table(FORMAT)?
                    .insert(JOURNAL_FOLDED_KEY, journal.generation())?;
            }
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
