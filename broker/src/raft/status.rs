//! [`RaftStatus`]: the few figures of one Raft group that an operator's
//! view needs (term, log and applied index, leader), read from openraft's
//! metrics without copying them. It knows nothing of what the group
//! replicates.

use openraft::ServerState;

use super::leadership::Metrics;
use crate::net::NodeId;

/// One group's Raft figures as this node sees them now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaftStatus {
    /// The term this node is in.
    pub term: u64,
    /// The last index in this node's log.
    pub last_log_index: Option<u64>,
    /// The last index this node applied (at most the commit index, which
    /// openraft 0.9 does not report).
    pub applied_index: Option<u64>,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// Whether this node is that leader.
    pub leading: bool,
    /// On the leader: milliseconds since a quorum last acknowledged it
    /// (`None` elsewhere, or before the first acknowledgement).
    pub quorum_ack_age_ms: Option<u64>,
}

impl RaftStatus {
    /// The figures of `metrics`.
    pub(crate) fn of(metrics: &Metrics) -> RaftStatus {
        RaftStatus {
            term: metrics.current_term,
            last_log_index: metrics.last_log_index,
            applied_index: metrics.last_applied.map(|id| id.index),
            leader: metrics.current_leader,
            leading: metrics.state == ServerState::Leader
                && metrics.current_leader == Some(metrics.id),
            quorum_ack_age_ms: metrics.millis_since_quorum_ack,
        }
    }
}
