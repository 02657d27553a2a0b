//! Giving the file back its free space. redb reuses freed pages but never
//! shrinks its file by itself: after a deep queue is drained and its log
//! purged, the file keeps the size of the deepest log it ever held (161 MB
//! after a 1M x 256 B fill and drain, where the live data is a few KB).
//! `Database::compact` moves the live pages to the front and truncates, but
//! needs the database to itself. So the database sits behind a `RwLock`:
//! every reader and every write transaction holds it shared, and the
//! writer thread takes it exclusively to compact once the store has
//! committed nothing for a few seconds (woken by a tick), when the file is
//! at least [`MIN_FILE_BYTES`] and no more than [`MAX_LIVE_PERCENT`] of it
//! holds live pages, and at most once per [`MIN_INTERVAL`]. So a busy log
//! (a queue filling) is never stalled by it; readers wait meanwhile (a few
//! fsyncs over little live data).
//!
//! A compaction is crash-safe (redb commits it in two phases). One that
//! fails with an I/O error poisons the writer like a failed commit.
//! This module knows tables only as redb does: nothing of Raft.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redb::Database;

use crate::error::Error;

/// The database, shared by readers and the writer (see the module docs).
pub(crate) type SharedDb = Arc<RwLock<Database>>;

/// Smallest file worth compacting.
pub(crate) const MIN_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Compact when the live pages are at most this share of the file.
pub(crate) const MAX_LIVE_PERCENT: u64 = 25;
/// At most one compaction per this long.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// What a compaction did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compacted {
    pub(crate) file_bytes_before: u64,
    pub(crate) file_bytes_after: u64,
    pub(crate) took: Duration,
}

/// When the file at `path` was last compacted, and whether it is due.
#[derive(Debug)]
pub(crate) struct CompactionPolicy {
    last: Option<Instant>,
}

impl CompactionPolicy {
    pub(crate) fn new() -> Self {
        CompactionPolicy { last: None }
    }

    /// Compacts the file if it is due (see the module docs). The caller
    /// holds no transaction of `db`.
    pub(crate) fn maybe_compact(
        &mut self,
        db: &SharedDb,
        path: &Path,
    ) -> Result<Option<Compacted>, Error> {
        if self.last.is_some_and(|at| at.elapsed() < MIN_INTERVAL) {
            return Ok(None);
        }
        let Ok(file_bytes_before) = std::fs::metadata(path).map(|m| m.len()) else {
            return Ok(None);
        };
        if file_bytes_before < MIN_FILE_BYTES {
            return Ok(None);
        }
        let live_bytes = {
            let db = db.read().unwrap_or_else(PoisonError::into_inner);
            let txn = db.begin_write()?;
            let stats = txn.stats()?;
            txn.abort()?;
            // The pages of the user trees, not `allocated_pages`, which
            // still counts what the purge just freed (redb releases a
            // commit's freed pages in a later transaction).
            (stats.leaf_pages() + stats.branch_pages()) * stats.page_size() as u64
        };
        if live_bytes * 100 > file_bytes_before * MAX_LIVE_PERCENT {
            return Ok(None);
        }
        self.last = Some(Instant::now());
        let started = Instant::now();
        {
            let mut db = db.write().unwrap_or_else(PoisonError::into_inner);
            // Each call moves what it can; a few rounds reach the floor.
            for _ in 0..8 {
                match db.compact() {
                    Ok(true) => continue,
                    Ok(false) => break,
                    // A reader still holds a transaction: try another time.
                    Err(redb::CompactionError::TransactionInProgress) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let file_bytes_after = std::fs::metadata(path).map_or(file_bytes_before, |m| m.len());
        Ok(Some(Compacted {
            file_bytes_before,
            file_bytes_after,
            took: started.elapsed(),
        }))
    }
}
