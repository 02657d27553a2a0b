//! The vote guard: a replica that knows its group's leader lives refuses
//! to vote for another candidate, as openraft does while a leader lease
//! runs. The lease comes from heartbeats, and a quiet group
//! (`quiet.rs`) sends none, so without this a quiet follower grants any
//! up-to-date candidate: a node restarted just after it handed its
//! leadership away (its vote for the new leader not yet committed) or a
//! node cut off from the leader alone would win the group while the
//! leader, vouched for by the same follower's node, went on serving.
//!
//! Refused here: a vote request that is not a leadership transfer (those
//! the leader itself asked for) at a follower whose leader, not the
//! candidate, has its node alive, heard within two probe intervals, and
//! was heard in that node's current incarnation
//! (`PeerLiveness::vouch_fresh`: a survivor that had not yet noticed its
//! leader's death refused the successor's first request, and the group
//! waited an election time-out).
//!
//! Any other replica votes as openraft decides: one whose leader is lost
//! or restarted, one that knows no leader, and the leader itself. The
//! leader is left to openraft on purpose: a node cut from the leader
//! alone campaigns with ever higher terms while the cut lasts, and once
//! it heals, the leader granting it (one election) is how the group
//! settles; refused there too, it would campaign for ever.
//!
//! The other side of a vote: a follower that granted its vote to a
//! candidate whose node is alive waits for that candidate to lead (its
//! first AppendEntries) instead of campaigning at its own election
//! time-out, for up to two longest election time-outs after the grant
//! (`follower_tick.rs`). The candidate's log is at least as long as the
//! follower's (openraft grants only then), so with that vote it can win,
//! and would have, but for the load: after a node died at 10,000 queues,
//! each survivor granted thousands of votes and had thousands of
//! elections of its own to finish; a follower whose new leader's first
//! AppendEntries came later than its time-out campaigned, deposed that
//! leader without winning (its log lacked the leader's first entry) and
//! the group waited for another election. A candidate this replica
//! refused for a log shorter than its own is never waited for, whatever
//! vote the replica holds: it cannot win with this replica's vote. This
//! file knows nothing of the RPC's transport.

use openraft::async_runtime::watch::WatchReceiver;
use openraft::raft::{VoteRequest, VoteResponse};
use openraft::ServerState;

use std::time::Duration;

use super::peer_liveness::PeerLiveness;
use super::queue::QuorumQueue;
use super::types::QueueRaft;
use crate::net::NodeId;
use crate::queue::Queue;

impl QuorumQueue {
    /// Whether this replica refuses `request` by the rule above.
    pub(super) fn refuses_vote(&self, request: &VoteRequest<QueueRaft>) -> bool {
        if request.leadership_transfer {
            return false;
        }
        let candidate: NodeId = request.vote.leader_id().node_id;
        let leader = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow_watched();
            let voter = |id: NodeId| {
                m.membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == id)
            };
            match (m.state, m.current_leader) {
                (ServerState::Follower, Some(leader))
                    if leader != candidate && leader != self.node_id && voter(leader) =>
                {
                    leader
                }
                _ => return false,
            }
        };
        let refused = self.leader_vouched(leader);
        if refused {
            tracing::debug!(queue = %self.address(), candidate, leader, "vote refused: this replica's leader lives");
        }
        refused
    }

    /// Whether `leader`'s node is alive, heard lately, and this replica
    /// heard it in that node's current incarnation
    /// (`PeerLiveness::vouch_fresh`).
    fn leader_vouched(&self, leader: NodeId) -> bool {
        let Some((heard, age)) = self.heard_contact() else {
            return false;
        };
        heard == leader
            && self
                .shared
                .quiet
                .liveness()
                .is_some_and(|l| l.vouch_fresh(leader, age))
    }

    /// Note what this replica answered to `request`: a granted vote is
    /// the leader it waits for next; a refusal for a shorter log, a
    /// candidate it must not wait for.
    pub(super) fn note_vote_answer(
        &self,
        request: &VoteRequest<QueueRaft>,
        answer: &Result<VoteResponse<QueueRaft>, openraft::error::RaftError<QueueRaft>>,
    ) {
        let candidate = request.vote.leader_id().node_id;
        match answer {
            Ok(response) if response.vote_granted => {
                self.contact
                    .note_grant(candidate, request.vote.leader_id().term);
            }
            Ok(response) if response.last_log_id > request.last_log_id => {
                self.contact.note_behind(candidate);
            }
            _ => {}
        }
    }

    /// Whether this replica refused `candidate` for a shorter log since it
    /// last granted it a vote.
    pub(super) fn candidate_behind(&self, candidate: NodeId) -> bool {
        self.contact.is_behind(candidate)
    }

    /// Whether this replica granted its vote for `term` to `candidate`
    /// less than `wait` ago, in the current incarnation of the
    /// candidate's node, which is alive: it waits for that candidate to
    /// lead (the rule above).
    pub(super) fn awaits_granted(
        &self,
        candidate: NodeId,
        term: u64,
        liveness: &PeerLiveness,
        wait: Duration,
    ) -> bool {
        awaits(self.contact.last_grant(), candidate, term, liveness, wait)
    }

    /// The refusal: this replica's vote and last log id, not granted.
    pub(super) async fn refusal(
        &self,
    ) -> Result<VoteResponse<QueueRaft>, openraft::error::RaftError<QueueRaft>> {
        self.raft
            .with_raft_state(|st| {
                VoteResponse::new(st.vote_ref(), st.log_ids.last().cloned(), false)
            })
            .await
            .map_err(openraft::error::RaftError::Fatal)
    }
}

/// [`QuorumQueue::awaits_granted`] on `grant`, the replica's last granted
/// vote (candidate, term, age).
fn awaits(
    grant: Option<(NodeId, u64, Duration)>,
    candidate: NodeId,
    term: u64,
    liveness: &PeerLiveness,
    wait: Duration,
) -> bool {
    grant.is_some_and(|(granted, granted_term, age)| {
        granted == candidate
            && granted_term == term
            && age < wait
            && liveness.vouch(candidate, age).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_granted_candidate_is_awaited_while_its_node_lives_and_for_a_while() {
        let live = PeerLiveness::new(Duration::from_millis(1000));
        let wait = Duration::from_secs(6);
        live.heard(3, 1, true);
        tokio::time::advance(Duration::from_millis(200)).await;
        live.heard(3, 1, true);
        let now = Some((3, 5, Duration::ZERO));
        assert!(awaits(now, 3, 5, &live, wait));
        assert!(!awaits(None, 3, 5, &live, wait), "no vote granted");
        assert!(!awaits(now, 2, 5, &live, wait), "granted to another node");
        assert!(!awaits(now, 3, 6, &live, wait), "granted in another term");
        let old = Some((3, 5, Duration::from_millis(100)));
        assert!(awaits(old, 3, 5, &live, Duration::from_millis(150)));
        assert!(
            !awaits(old, 3, 5, &live, Duration::from_millis(100)),
            "waited long enough"
        );
        // Granted before the candidate's node was first heard in this incarnation.
        let before = Some((3, 5, Duration::from_millis(300)));
        assert!(!awaits(before, 3, 5, &live, wait));
        // The candidate's node lost.
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert!(!awaits(now, 3, 5, &live, wait));
    }
}
