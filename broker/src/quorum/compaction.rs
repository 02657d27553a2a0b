//! When a quorum queue's log has grown enough to be worth a snapshot, by
//! size rather than by entry count.
//!
//! Why: openraft 0.9 only counts entries (`SnapshotPolicy::LogsSinceLast`),
//! and one enqueue entry carries up to 4 MiB of publishes, so a count alone
//! let the log of a busy, fully consumed queue grow to tens of GiB (and the
//! redb file with it: it reuses freed pages but never shrinks) before a
//! snapshot allowed a purge. The state machine counts the bytes it applies;
//! once they pass `max(floor, live bytes of the queue)` it asks for a
//! snapshot, and the purge after it drops the log up to there.
//!
//! Tying the threshold to the live bytes bounds what snapshots cost a deep
//! queue: each one writes every live message, so between two of them at
//! least as many bytes went through the log (write amplification at most
//! about 2x), while the log of a shallow queue stays near the floor.

use tokio::sync::Notify;

/// Log bytes applied since the last snapshot, and when one was asked for.
#[derive(Debug, Default)]
pub(crate) struct LogGrowth {
    since_snapshot: u64,
    /// `since_snapshot` when a snapshot was last asked for.
    asked_at: Option<u64>,
    /// A body applied since the last snapshot went to a segment file: a
    /// replay of the log from that snapshot would page it again.
    paged_since_snapshot: bool,
}

/// Bytes counted for one entry besides its messages (ids, framing), so that
/// a log of settlements alone also reaches the threshold.
pub(crate) const ENTRY_OVERHEAD_BYTES: u64 = 32;

impl LogGrowth {
    /// Count `bytes` applied; true when a snapshot should be asked for now.
    /// Once asked, it asks again only after as many bytes more: openraft
    /// drops a request that comes while it is building a snapshot, and that
    /// build may have started before the bytes that made this one due.
    pub(crate) fn applied(&mut self, bytes: u64, live_bytes: u64, floor: u64) -> bool {
        self.since_snapshot = self.since_snapshot.saturating_add(bytes);
        if floor == 0 {
            return false;
        }
        let threshold = floor.max(live_bytes);
        let due = match self.asked_at {
            None => threshold,
            Some(at) => at.saturating_add(threshold),
        };
        if self.since_snapshot < due {
            return false;
        }
        self.asked_at = Some(self.since_snapshot);
        true
    }

    /// A snapshot of everything applied so far is being built.
    pub(crate) fn snapshotted(&mut self) {
        self.since_snapshot = 0;
        self.asked_at = None;
        self.paged_since_snapshot = false;
    }

    /// A body applied now went to a segment file.
    pub(crate) fn paged(&mut self) {
        self.paged_since_snapshot = true;
    }

    /// Whether a body applied since the last snapshot went to a segment.
    pub(crate) fn paged_since_snapshot(&self) -> bool {
        self.paged_since_snapshot
    }

    /// Bytes applied since the last snapshot.
    pub(crate) fn since_snapshot(&self) -> u64 {
        self.since_snapshot
    }
}

/// The state machine's signal to the group's watcher task, which owns the
/// Raft handle and asks openraft for the snapshot (the state machine must
/// not call into its own Raft core: it runs inside it).
#[derive(Debug, Default)]
pub(crate) struct SnapshotWanted(Notify);

impl SnapshotWanted {
    pub(crate) fn signal(&self) {
        // `notify_one` keeps one permit if the watcher is busy, so a request
        // made while it handles another event is not lost.
        self.0.notify_one();
    }

    pub(crate) async fn wait(&self) {
        self.0.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_past_the_floor_then_again_after_the_snapshot() {
        let mut g = LogGrowth::default();
        assert!(!g.applied(60, 0, 100));
        assert!(g.applied(60, 0, 100));
        assert!(!g.applied(50, 0, 100), "just asked");
        g.snapshotted();
        assert_eq!(g.since_snapshot(), 0);
        assert!(!g.applied(99, 0, 100));
        assert!(g.applied(1, 0, 100));
    }

    #[test]
    fn a_snapshot_covers_the_bodies_paged_before_it() {
        let mut g = LogGrowth::default();
        assert!(!g.paged_since_snapshot());
        g.paged();
        assert!(g.paged_since_snapshot());
        g.snapshotted();
        assert!(!g.paged_since_snapshot());
    }

    #[test]
    fn a_request_that_got_no_snapshot_is_repeated_a_threshold_later() {
        let mut g = LogGrowth::default();
        assert!(g.applied(120, 0, 100));
        assert!(!g.applied(99, 0, 100));
        assert!(g.applied(1, 0, 100), "220 bytes: 100 past the last request");
    }

    #[test]
    fn a_deep_queue_waits_for_as_many_log_bytes_as_it_holds() {
        let mut g = LogGrowth::default();
        assert!(!g.applied(150, 1_000, 100));
        assert!(!g.applied(849, 1_000, 100));
        assert!(g.applied(1, 1_000, 100));
    }

    #[test]
    fn a_zero_floor_switches_it_off() {
        let mut g = LogGrowth::default();
        assert!(!g.applied(u64::MAX, 0, 0));
    }
}
