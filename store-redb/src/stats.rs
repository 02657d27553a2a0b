//! Counters of the group-commit writer, for metrics.
//!
//! Only the writer thread updates them (relaxed atomics: each counter is
//! exact, but a snapshot taken during a commit may mix the counters of two
//! commits). Anyone may read them through
//! [`LogStore::stats`](crate::LogStore::stats).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Live counters of the writer thread.
#[derive(Debug, Default)]
pub struct BatchStats {
    commits: AtomicU64,
    journal_folds: AtomicU64,
    journal_direct_writes: AtomicU64,
    failed_commits: AtomicU64,
    requests: AtomicU64,
    records: AtomicU64,
    entries: AtomicU64,
    bytes: AtomicU64,
    commit_nanos: AtomicU64,
    commit_nanos_max: AtomicU64,
    requests_per_commit_max: AtomicU64,
    /// Commits per bucket of [`COMMIT_TIME_BUCKETS_SECONDS`] (not
    /// cumulative), the last for those above its last bound.
    commit_time_buckets: [AtomicU64; COMMIT_TIME_BUCKETS_SECONDS.len() + 1],
}

/// Upper bounds, in seconds, of the buckets of
/// [`BatchStatsSnapshot::commit_time_buckets`] (the last, +Inf, implied).
pub const COMMIT_TIME_BUCKETS_SECONDS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
];

/// A copy of the [`BatchStats`] counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStatsSnapshot {
    /// Durable writes of requests: journal records written and write
    /// transactions committed (each is one fsync). A fold with no request
    /// of its own is not one.
    pub commits: u64,
    /// Folds of the append journal into the tables (each one transaction
    /// and one fsync, also counted in `commits` when it carried requests).
    pub journal_folds: u64,
    /// Journal records written with `O_DIRECT | O_DSYNC` (also counted in
    /// `commits`); the others were written and `fdatasync`ed.
    pub journal_direct_writes: u64,
    /// Write transactions that failed.
    pub failed_commits: u64,
    /// Requests (appends, votes, truncates, purges, ...) committed.
    pub requests: u64,
    /// Rows written or deleted-by-range ops counted as one (entries plus
    /// metadata rows plus range deletions).
    pub records: u64,
    /// Log entries written.
    pub entries: u64,
    /// Bytes of records written (framed values, keys excluded).
    pub bytes: u64,
    /// Time spent building and committing transactions, fsync included.
    pub commit_time: Duration,
    /// The longest single commit so far (every append of its batch waited
    /// at least that long).
    pub commit_time_max: Duration,
    /// The largest number of requests in one commit so far.
    pub requests_per_commit_max: u64,
    /// Commits per duration bucket (bounds in
    /// [`COMMIT_TIME_BUCKETS_SECONDS`], the last above them all), not
    /// cumulative: a histogram of `commit_time`.
    pub commit_time_buckets: [u64; COMMIT_TIME_BUCKETS_SECONDS.len() + 1],
}

impl BatchStatsSnapshot {
    /// Mean requests per commit (per fsync).
    pub fn requests_per_commit(&self) -> f64 {
        ratio(self.requests, self.commits)
    }

    /// Mean records per commit (per fsync).
    pub fn records_per_commit(&self) -> f64 {
        ratio(self.records, self.commits)
    }

    /// Mean log entries per commit (per fsync).
    pub fn entries_per_commit(&self) -> f64 {
        ratio(self.entries, self.commits)
    }

    /// Counters accumulated since `earlier`.
    pub fn since(&self, earlier: &BatchStatsSnapshot) -> BatchStatsSnapshot {
        BatchStatsSnapshot {
            commits: self.commits - earlier.commits,
            journal_folds: self.journal_folds - earlier.journal_folds,
            journal_direct_writes: self.journal_direct_writes - earlier.journal_direct_writes,
            failed_commits: self.failed_commits - earlier.failed_commits,
            requests: self.requests - earlier.requests,
            records: self.records - earlier.records,
            entries: self.entries - earlier.entries,
            bytes: self.bytes - earlier.bytes,
            commit_time: self.commit_time.saturating_sub(earlier.commit_time),
            commit_time_max: self.commit_time_max,
            requests_per_commit_max: self.requests_per_commit_max,
            commit_time_buckets: std::array::from_fn(|i| {
                self.commit_time_buckets[i] - earlier.commit_time_buckets[i]
            }),
        }
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// What one commit did, as the writer counts it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CommitTally {
    pub(crate) requests: u64,
    pub(crate) records: u64,
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
}

impl BatchStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> BatchStatsSnapshot {
        BatchStatsSnapshot {
            commits: self.commits.load(Ordering::Relaxed),
            journal_folds: self.journal_folds.load(Ordering::Relaxed),
            journal_direct_writes: self.journal_direct_writes.load(Ordering::Relaxed),
            failed_commits: self.failed_commits.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            commit_time: Duration::from_nanos(self.commit_nanos.load(Ordering::Relaxed)),
            commit_time_max: Duration::from_nanos(self.commit_nanos_max.load(Ordering::Relaxed)),
            requests_per_commit_max: self.requests_per_commit_max.load(Ordering::Relaxed),
            commit_time_buckets: std::array::from_fn(|i| {
                self.commit_time_buckets[i].load(Ordering::Relaxed)
            }),
        }
    }

    pub(crate) fn record_commit(&self, tally: CommitTally, took: Duration) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(tally.requests, Ordering::Relaxed);
        self.records.fetch_add(tally.records, Ordering::Relaxed);
        self.entries.fetch_add(tally.entries, Ordering::Relaxed);
        self.bytes.fetch_add(tally.bytes, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.commit_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.commit_nanos_max.fetch_max(nanos, Ordering::Relaxed);
        self.requests_per_commit_max
            .fetch_max(tally.requests, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        let bucket = COMMIT_TIME_BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(COMMIT_TIME_BUCKETS_SECONDS.len());
        if let Some(slot) = self.commit_time_buckets.get(bucket) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn record_direct_write(&self) {
        self.journal_direct_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_fold(&self) {
        self.journal_folds.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_failure(&self) {
        self.failed_commits.fetch_add(1, Ordering::Relaxed);
    }
}
