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
    /// The last index this node applied (at most the commit index).
    pub applied_index: Option<u64>,
    /// On the leader: the commit index, the highest index a majority of
    /// the voters hold (openraft 0.9 reports no commit index; the leader's
    /// replication progress, which includes its own log, gives it).
    /// `None` on other nodes.
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
    pub(crate) fn of(metrics: &Metrics) -> RaftStatus {
        let leading =
            metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id);
        RaftStatus {
            commit_index: if leading { commit_index(metrics) } else { None },
            term: metrics.current_term,
            last_log_index: metrics.last_log_index,
            applied_index: metrics.last_applied.map(|id| id.index),
            leader: metrics.current_leader,
            leading,
            quorum_ack_age_ms: metrics.millis_since_quorum_ack,
        }
    }
}

/// The highest index held by a majority of the voters, from the leader's
/// replication progress (matched log ids, its own included). With a joint
/// membership this is the new configuration's view only.
fn commit_index(metrics: &Metrics) -> Option<u64> {
    let progress = metrics.replication.as_ref()?;
    let mut matched: Vec<u64> = metrics
        .membership_config
        .membership()
        .voter_ids()
        .map(|id| {
            progress
                .get(&id)
                .and_then(|m| m.as_ref())
                .map_or(0, |log_id| log_id.index)
        })
        .collect();
    if matched.is_empty() {
        return None;
    }
    matched.sort_unstable_by(|a, b| b.cmp(a));
    matched.get(matched.len() / 2).copied()
}
