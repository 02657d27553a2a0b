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
//!
//! It also keeps the last vote the replica granted (to whom, in which
//! term, when): a candidate that won this replica's vote is the leader it
//! waits for next; and the last candidate it refused for a log shorter
//! than its own, which it must not wait for (`vote_guard.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
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
    /// What this replica answered to vote requests (rare), so a lock.
    votes: Mutex<VoteNotes>,
}

/// See [`LeaderContact::note_grant`] and [`LeaderContact::note_behind`].
#[derive(Debug, Default)]
struct VoteNotes {
    /// The last vote granted: candidate, term, and milliseconds after
    /// `base`.
    granted: Option<(NodeId, u64, u64)>,
    /// The last candidate refused for a shorter log, unless granted since.
    behind: Option<NodeId>,
}

impl Default for LeaderContact {
    fn default() -> Self {
        LeaderContact {
            base: Instant::now(),
            at_ms: AtomicU64::new(0),
            leader: AtomicU64::new(0),
            votes: Mutex::default(),
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

impl LeaderContact {
    /// This replica granted its vote to `candidate` in `term` just now.
    pub(crate) fn note_grant(&self, candidate: NodeId, term: u64) {
        let at = self.base.elapsed().as_millis() as u64;
        let mut votes = self.votes.lock().unwrap_or_else(|p| p.into_inner());
        votes.granted = Some((candidate, term, at));
        if votes.behind == Some(candidate) {
            votes.behind = None;
        }
    }

    /// This replica refused `candidate` its vote just now because the
    /// candidate's log is shorter than its own.
    pub(crate) fn note_behind(&self, candidate: NodeId) {
        self.votes.lock().unwrap_or_else(|p| p.into_inner()).behind = Some(candidate);
    }

    /// The last vote granted, its term and how long ago, if any.
    pub(crate) fn last_grant(&self) -> Option<(NodeId, u64, Duration)> {
        let granted = self.votes.lock().unwrap_or_else(|p| p.into_inner()).granted;
        let (candidate, term, at) = granted?;
        let now = self.base.elapsed().as_millis() as u64;
        Some((
            candidate,
            term,
            Duration::from_millis(now.saturating_sub(at)),
        ))
    }

    /// Whether the last candidate refused for a shorter log, and not
    /// granted a vote since, is `candidate`.
    pub(crate) fn is_behind(&self, candidate: NodeId) -> bool {
        self.votes.lock().unwrap_or_else(|p| p.into_inner()).behind == Some(candidate)
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

    #[test]
    fn the_last_grant_with_its_term_and_age() {
        let contact = LeaderContact::default();
        assert_eq!(contact.last_grant(), None);
        contact.note_grant(2, 7);
        contact.note_grant(3, 8);
        let (candidate, term, age) = contact.last_grant().unwrap();
        assert_eq!((candidate, term), (3, 8));
        assert!(age < Duration::from_secs(1));
        assert_eq!(
            contact.last(),
            None,
            "a grant is not a contact with a leader"
        );
        contact.note_behind(2);
        assert!(contact.is_behind(2) && !contact.is_behind(3));
        contact.note_grant(2, 9);
        assert!(!contact.is_behind(2), "granted since");
    }
}
