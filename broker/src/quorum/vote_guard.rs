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
//! candidate, has its node alive and was heard in that node's current
//! incarnation (`peer_liveness::vouch`).
//!
//! Any other replica votes as openraft decides: one whose leader is lost
//! or restarted, one that knows no leader, and the leader itself. The
//! leader is left to openraft on purpose: a node cut from the leader
//! alone campaigns with ever higher terms while the cut lasts, and once
//! it heals, the leader granting it (one election) is how the group
//! settles; refused there too, it would campaign for ever. This file
//! knows nothing of the RPC's transport.

use openraft::async_runtime::watch::WatchReceiver;
use openraft::raft::{VoteRequest, VoteResponse};
use openraft::ServerState;

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

    /// Whether `leader`'s node is alive and this replica heard it in that
    /// node's current incarnation.
    fn leader_vouched(&self, leader: NodeId) -> bool {
        let Some((heard, age)) = self.heard_contact() else {
            return false;
        };
        heard == leader
            && self
                .shared
                .quiet
                .liveness()
                .is_some_and(|l| l.vouch(leader, age).is_some())
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
