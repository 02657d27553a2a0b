//! Telling a node cut off from a quorum queue's leader from a node
//! watching an ordinary fail-over. Both see the same thing at first: the
//! leader they knew does not answer and no one else serves. A fail-over
//! ends within an election or two; a cut does not end until the network
//! heals, and meanwhile the node's clients are better served by another
//! node. So the search for a leader (`follow.rs`) gives up early, and
//! detaches its links with an error, only on evidence of a cut that a
//! fail-over cannot produce:
//!
//! - this node's own replica is openraft's leader without a quorum's
//!   acknowledgement for the check-quorum window (`leadership_watch.rs`):
//!   the other replicas have stopped answering it, and have had an
//!   election time-out to elect another leader;
//! - a replica that answers heard from leader L a moment ago (an
//!   AppendEntries within the freshness window), while L does not answer
//!   this node: L is alive and leading, only not for this node. After a
//!   leader dies, its last contact with the others only ages, so this
//!   cannot hold for longer than the freshness window; it must hold for
//!   an election time-out;
//! - no other replica answers at all for an election time-out and two
//!   seconds: this node is alone. In a fail-over the surviving replica
//!   answers (with no leader, or the dead one).
//!
//! In the last two, a fresh contact of this node's own replica with a
//! leader (the Raft traffic does reach it) vetoes the verdict. Transient
//! queues (one owner, no replicas) keep the plain leader wait. This file
//! holds the rules only; it knows nothing of probes or links.

use std::time::{Duration, Instant};

use crate::config::QuorumConfig;
use crate::net::NodeId;

/// Why a search concluded that this node is cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// This node's replica leads without a quorum's acknowledgement.
    LeaderWithoutQuorum,
    /// Leader `0` is alive (vouched for by a replica that answers) and
    /// does not answer this node.
    LeaderUnreachable(NodeId),
    /// No other replica answers.
    Alone,
}

impl Cut {
    /// The detach description's reason.
    pub(super) fn describe(self) -> String {
        match self {
            Cut::LeaderWithoutQuorum => {
                "this node's replica lost its quorum; the queue is served elsewhere".into()
            }
            Cut::LeaderUnreachable(leader) => {
                format!("this node cannot reach the queue's leader (node {leader})")
            }
            Cut::Alone => "this node reaches none of the queue's other replicas".into(),
        }
    }
}

/// The time bounds, from the Raft configuration.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rules {
    /// A replica's contact with its leader younger than this vouches that
    /// the leader is alive (the minimum election time-out: a follower
    /// that heard nothing for that long starts an election anyway).
    pub(super) fresh: Duration,
    /// How long an unreachable, vouched-for leader must last.
    pub(super) hold_unreachable: Duration,
    /// How long silence of every other replica must last.
    pub(super) hold_alone: Duration,
}

impl Rules {
    pub(super) fn new(config: &QuorumConfig) -> Rules {
        let max = Duration::from_millis(config.election_timeout_max_ms);
        Rules {
            fresh: Duration::from_millis(config.election_timeout_min_ms),
            hold_unreachable: max,
            hold_alone: max + Duration::from_secs(2),
        }
    }
}

/// What one search saw of the replicas, collected while probing.
#[derive(Debug, Default)]
pub(super) struct Sightings {
    /// Some other replica answered.
    answered: bool,
    /// Leaders a replica that answered heard from within `fresh`.
    vouched: Vec<NodeId>,
    /// Nodes that did not answer.
    silent: Vec<NodeId>,
}

impl Sightings {
    /// A replica answered, naming `leader` (heard from `heard` ago, if
    /// known).
    pub(super) fn answered(
        &mut self,
        rules: &Rules,
        leader: Option<NodeId>,
        heard: Option<Duration>,
    ) {
        self.answered = true;
        if let (Some(leader), Some(heard)) = (leader, heard) {
            if heard < rules.fresh && !self.vouched.contains(&leader) {
                self.vouched.push(leader);
            }
        }
    }

    /// `node` did not answer.
    pub(super) fn silent(&mut self, node: NodeId) {
        self.silent.push(node);
    }

    /// The evidence of a cut, if any. `me`: this node; `leads_alone`: its
    /// replica leads without a quorum; `own_contact`: its replica's last
    /// contact with a leader.
    pub(super) fn verdict(
        &self,
        rules: &Rules,
        me: NodeId,
        leads_alone: bool,
        own_contact: Option<(NodeId, Duration)>,
    ) -> Option<Cut> {
        if leads_alone {
            return Some(Cut::LeaderWithoutQuorum);
        }
        let own_fresh = own_contact.filter(|(_, age)| *age < rules.fresh);
        if let Some(leader) = self
            .vouched
            .iter()
            .copied()
            .find(|l| *l != me && self.silent.contains(l))
        {
            if own_fresh.is_some_and(|(heard, _)| heard == leader) {
                return None;
            }
            return Some(Cut::LeaderUnreachable(leader));
        }
        if !self.answered && !self.silent.is_empty() && own_fresh.is_none() {
            return Some(Cut::Alone);
        }
        None
    }
}

/// Whether a cut has lasted long enough to give up: the verdicts of
/// consecutive searches.
#[derive(Debug, Default)]
pub(super) struct CutWatch {
    /// When the current run of cut verdicts began.
    since: Option<Instant>,
}

impl CutWatch {
    /// Take one search's verdict at `now`; the cut to give up on, if it
    /// has lasted its hold.
    pub(super) fn observe(
        &mut self,
        rules: &Rules,
        verdict: Option<Cut>,
        now: Instant,
    ) -> Option<Cut> {
        let Some(cut) = verdict else {
            self.since = None;
            return None;
        };
        let since = *self.since.get_or_insert(now);
        let hold = match cut {
            Cut::LeaderWithoutQuorum => Duration::ZERO,
            Cut::LeaderUnreachable(_) => rules.hold_unreachable,
            Cut::Alone => rules.hold_alone,
        };
        (now.duration_since(since) >= hold).then_some(cut)
    }

    /// A target was found, or a search saw no cut.
    pub(super) fn clear(&mut self) {
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        Rules {
            fresh: Duration::from_millis(1500),
            hold_unreachable: Duration::from_secs(3),
            hold_alone: Duration::from_secs(5),
        }
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_vouched_for_leader_that_does_not_answer_is_a_cut() {
        let r = rules();
        let mut s = Sightings::default();
        s.silent(1);
        s.answered(&r, Some(1), Some(MS(200)));
        assert_eq!(
            s.verdict(&r, 3, false, None),
            Some(Cut::LeaderUnreachable(1))
        );
        // This node's own replica hears from that leader: not cut.
        assert_eq!(s.verdict(&r, 3, false, Some((1, MS(100)))), None);
        // ... unless that contact is old.
        assert_eq!(
            s.verdict(&r, 3, false, Some((1, MS(4000)))),
            Some(Cut::LeaderUnreachable(1))
        );
    }

    #[test]
    fn a_fail_over_is_not_a_cut() {
        let r = rules();
        // The survivor still names the dead leader, heard from a while ago.
        let mut s = Sightings::default();
        s.silent(1);
        s.answered(&r, Some(1), Some(MS(1600)));
        assert_eq!(s.verdict(&r, 3, false, None), None);
        // Or it is electing.
        let mut s = Sightings::default();
        s.silent(1);
        s.answered(&r, None, None);
        assert_eq!(s.verdict(&r, 3, false, None), None);
        // A vouched leader that answered (but does not serve yet) is no cut.
        let mut s = Sightings::default();
        s.answered(&r, Some(1), Some(MS(10)));
        s.answered(&r, None, None);
        assert_eq!(s.verdict(&r, 3, false, None), None);
    }

    #[test]
    fn silence_of_every_replica_is_a_cut_unless_the_leader_reaches_us() {
        let r = rules();
        let mut s = Sightings::default();
        s.silent(1);
        s.silent(2);
        assert_eq!(s.verdict(&r, 3, false, None), Some(Cut::Alone));
        assert_eq!(s.verdict(&r, 3, false, Some((1, MS(300)))), None);
        // Nothing probed at all (no other replica known): no verdict.
        assert_eq!(Sightings::default().verdict(&r, 3, false, None), None);
        // A leader without quorum is a cut whatever the others say.
        assert_eq!(
            Sightings::default().verdict(&r, 3, true, None),
            Some(Cut::LeaderWithoutQuorum)
        );
    }

    #[test]
    fn a_cut_must_last_its_hold_without_a_break() {
        let r = rules();
        let t0 = Instant::now();
        let unreachable = Some(Cut::LeaderUnreachable(1));
        let mut w = CutWatch::default();
        assert_eq!(w.observe(&r, unreachable, t0), None);
        assert_eq!(w.observe(&r, unreachable, t0 + MS(2900)), None);
        assert_eq!(w.observe(&r, unreachable, t0 + MS(3000)), unreachable);
        // A search without a cut starts the count again.
        let mut w = CutWatch::default();
        w.observe(&r, unreachable, t0);
        w.observe(&r, None, t0 + MS(2000));
        assert_eq!(w.observe(&r, unreachable, t0 + MS(3500)), None);
        assert_eq!(w.observe(&r, Some(Cut::Alone), t0 + MS(8400)), None);
        assert_eq!(
            w.observe(&r, Some(Cut::Alone), t0 + MS(8500)),
            Some(Cut::Alone)
        );
        // A leader without quorum gives up at once.
        let mut w = CutWatch::default();
        assert_eq!(
            w.observe(&r, Some(Cut::LeaderWithoutQuorum), t0),
            Some(Cut::LeaderWithoutQuorum)
        );
    }
}
