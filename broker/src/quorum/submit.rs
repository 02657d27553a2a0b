//! Submitting one entry to a queue's Raft group without waiting in the
//! caller: openraft 0.10's `client_write_ff` takes a responder, and this
//! hands back the receiver its outcome arrives on (committed and applied,
//! or refused), as 0.9's returned.
//!
//! Knows nothing of what the entry carries.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::error::Fatal;
use openraft::impls::ProgressResponder;
use openraft::raft::ClientWriteResult;
use openraft::ServerState;
use tokio::sync::oneshot;

use super::types::{Command, QueueRaft, QueueRaftHandle};
use crate::net::NodeId;

/// Submits `command`; the receiver resolves once it is applied (or
/// refused). Fails only if the group has stopped.
pub(super) async fn write_ff(
    raft: &QueueRaftHandle,
    command: Command,
) -> Result<oneshot::Receiver<ClientWriteResult<QueueRaft>>, Fatal<QueueRaft>> {
    lease_acknowledged(raft).await;
    let (responder, done) = ProgressResponder::complete_only();
    raft.client_write_ff(command, Some(responder)).await?;
    Ok(done)
}

/// Whether `membership` has a single voter. Walked in place: openraft's
/// `voter_ids` collects a set first (about 1.6k instructions per publish).
fn alone(membership: &openraft::Membership<NodeId, openraft::BasicNode>) -> bool {
    let mut voters = membership.get_joint_config().iter().flatten();
    let first = voters.next();
    voters.all(|id| Some(id) == first)
}

/// openraft 0.10 refuses a write (`ForwardToLeader` naming no leader,
/// reason "lease expired") while its leader lease is not valid: a leader
/// just elected has none until a quorum acknowledged it in its term (one
/// append round trip), and a quiet leader (`quiet.rs`, no heartbeats) lets
/// it lapse. Publishes that came in that gap were answered `released`
/// (the first publish to a new queue, after its attach waited for the
/// election). A leader whose last quorum acknowledgement is older than
/// half the lease sends a heartbeat and waits for it to be acknowledged,
/// bounded by the lease (`election_timeout_max`); then submits anyway: a
/// leader that still has none is cut off and its refusal is the answer.
/// The caller's order is kept: it waits in line.
pub(super) async fn lease_acknowledged(raft: &QueueRaftHandle) {
    let lease = Duration::from_millis(raft.config().election_timeout_max);
    let awaiting = |m: &openraft::RaftMetrics<QueueRaft>| {
        // `None` before the first acknowledgement; a leader alone in its
        // group acknowledges itself at every turn.
        m.state == ServerState::Leader
            && m.last_quorum_acked
                .as_ref()
                .is_none_or(|at| openraft::Instant::elapsed(&**at) >= lease / 2)
            && !alone(m.membership_config.membership())
    };
    let mut metrics = raft.metrics();
    let (waits, acked) = {
        let m = metrics.borrow_watched();
        (awaiting(&m), m.last_quorum_acked.is_some())
    };
    if !waits {
        return;
    }
    if acked {
        // Lapsed (a quiet leader): ask for the acknowledgements now.
        let _ = raft.trigger().heartbeat().await;
    }
    let _ = tokio::time::timeout(lease, async {
        while metrics.changed().await.is_ok() {
            if !awaiting(&metrics.borrow_watched()) {
                return;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use openraft::{BasicNode, Membership};

    use super::*;

    fn membership(configs: &[&[NodeId]]) -> Membership<NodeId, BasicNode> {
        let configs: Vec<BTreeSet<NodeId>> = configs
            .iter()
            .map(|c| c.iter().copied().collect())
            .collect();
        Membership::new_with_defaults(configs, std::iter::empty::<NodeId>())
    }

    #[test]
    fn alone_means_one_voter_across_joint_configs() {
        assert!(alone(&membership(&[&[1]])));
        assert!(alone(&membership(&[&[2], &[2]])));
        assert!(!alone(&membership(&[&[1, 2, 3]])));
        assert!(!alone(&membership(&[&[1], &[1, 2]])));
        assert!(!alone(&membership(&[&[1], &[2]])));
        for m in [
            membership(&[&[1]]),
            membership(&[&[1, 2]]),
            membership(&[&[3], &[1, 3]]),
        ] {
            assert_eq!(alone(&m), m.voter_ids().nth(1).is_none());
        }
    }
}
