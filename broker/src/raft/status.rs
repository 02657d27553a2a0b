//! [`RaftStatus`]: the few figures of one Raft group that an operator's
//! view needs (term, log and applied index, leader), read from openraft's
//! metrics without copying them. It knows nothing of what the group
//! replicates.

use openraft::{Instant as _, ServerState};

use super::leadership::{GroupConfig, Metrics};
use crate::net::NodeId;

/// One group's Raft figures as this node sees them now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaftStatus {
    /// The term this node is in.
    pub term: u64,
    /// The last index in this node's log.
    pub last_log_index: Option<u64>,
    /// The last index this node applied (at most the commit index).
    pub applied_index: Option<u64>,
    /// The last index purged from this node's log (after a snapshot that
    /// covers it); the log holds the entries after it.
    pub purged_index: Option<u64>,
    /// On the leader: the commit index, the highest index a majority of
    /// the voters hold (openraft 0.10's `cluster_committed`). `None` on
    /// other nodes.
    pub commit_index: Option<u64>,
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
    pub(crate) fn of<C: GroupConfig>(metrics: &Metrics<C>) -> RaftStatus {
        let leading =
            metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id);
        RaftStatus {
            commit_index: match leading {
                true => metrics.cluster_committed.as_ref().map(|l| l.index()),
                false => None,
            },
            term: metrics.current_term,
            last_log_index: metrics.last_log_index,
            applied_index: metrics.last_applied.as_ref().map(|id| id.index()),
            purged_index: metrics.purged.as_ref().map(|id| id.index()),
            leader: metrics.current_leader,
            leading,
            quorum_ack_age_ms: metrics
                .last_quorum_acked
                .as_ref()
                .map(|at| at.elapsed().as_millis() as u64),
        }
    }
}
