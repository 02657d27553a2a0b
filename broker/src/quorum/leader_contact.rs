//! When a follower replica last heard from its leader: the time of the
//! last AppendEntries (heartbeats included) this replica took from the
//! leader it names. openraft 0.9 reports a leader's quorum
//! acknowledgements but nothing of the sort for a follower, so the RPC
//! handler (`node.rs`) notes each one here.
//!
//! Forwarding asks for it when it looks for a queue's leader: a replica
//! that heard from its leader a moment ago vouches that the leader is
//! alive and leading, which tells a node that cannot reach that leader
//! itself that it is cut off from it, not watching a fail-over (during
//! one, the replicas' last contact with the dead leader only ages). It
//! knows nothing of forwarding.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::net::NodeId;

/// The last contact with a leader; lock-free, written on every
/// AppendEntries a follower takes.
#[derive(Debug)]
pub(crate) struct LeaderContact {
    /// What `at_ms` counts from.
    base: Instant,
    /// Milliseconds after `base`, plus one, of the last contact (0: none).
    at_ms: AtomicU64,
    /// The leader of that contact.
    leader: AtomicU64,
}

impl Default for LeaderContact {
    fn default() -> Self {
        LeaderContact {
            base: Instant::now(),
            at_ms: AtomicU64::new(0),
            leader: AtomicU64::new(0),
        }
    }
}

impl LeaderContact {
    /// `leader` reached this replica just now (its AppendEntries was taken).
    pub(crate) fn note(&self, leader: NodeId) {
        let at = self.base.elapsed().as_millis() as u64 + 1;
        self.leader.store(leader, Ordering::Relaxed);
        self.at_ms.store(at, Ordering::Relaxed);
    }

    /// The leader last heard from and how long ago, if ever. (The two
    /// fields are read apart: a contact with a new leader written between
    /// the reads pairs that leader with a slightly older age, which only
    /// errs towards "stale".)
    pub(crate) fn last(&self) -> Option<(NodeId, Duration)> {
        let at = self.at_ms.load(Ordering::Relaxed);
        if at == 0 {
            return None;
        }
        let leader = self.leader.load(Ordering::Relaxed);
        let now = self.base.elapsed().as_millis() as u64 + 1;
        Some((leader, Duration::from_millis(now.saturating_sub(at))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_until_a_leader_is_heard_then_its_age() {
        let contact = LeaderContact::default();
        assert_eq!(contact.last(), None);
        contact.note(3);
        let (leader, age) = contact.last().unwrap();
        assert_eq!(leader, 3);
        assert!(age < Duration::from_secs(1));
        contact.note(2);
        assert_eq!(contact.last().map(|(l, _)| l), Some(2));
    }
}
