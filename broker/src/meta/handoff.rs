//! Handing the metadata group's leadership to a caught-up voter before this
//! node stops gracefully, so the other nodes need not wait out a lease and
//! an election time-out to declare queues or change members again. The
//! protocol is a queue's hand-off (`quorum/handoff.rs`) with the steps of
//! `crate::raft::leadership`: stop the log from growing, wait until a voter has
//! matched it, wait until this leader's own vote is a lease old (a leader
//! refuses votes before that), keep this node from campaigning, and ask
//! the target to campaign; this node's grant and the target's own vote
//! make the majority of three.
//!
//! Requests that reach this node meanwhile are answered "retry" (see
//! [`Metadata::execute`]), so they go to another node. One already being
//! executed may still append an entry after the catch-up check; then the
//! target loses on the log and the group elects as after a crash.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::service::Metadata;
use super::types::{MetaRaft, MetaReply, MetaRequest};
use crate::net::NodeId;
use openraft::async_runtime::watch::WatchReceiver;

use crate::raft::leadership::{campaign, held_at, leads_now, wait_caught_up, wait_out_own_lease};

/// How long the leader waits for a voter to match its log.
const CATCH_UP: Duration = Duration::from_secs(2);

impl Metadata {
    /// If this node leads the metadata group, hand the leadership to a
    /// caught-up voter; bounded by about two leases. From now on this node
    /// executes no request. Called by a graceful stop before
    /// [`Metadata::shutdown`], while this node still answers Raft RPCs.
    pub async fn hand_off_before_stopping(self: &Arc<Self>) {
        self.stopping.store(true, Ordering::Release);
        match self.hand_off().await {
            Ok(Some((target, leader))) => tracing::info!(
                node_id = self.node_id,
                target,
                ?leader,
                "metadata leadership handed off before stopping"
            ),
            Ok(None) => {}
            Err(error) => tracing::warn!(
                node_id = self.node_id,
                %error,
                "metadata leadership not handed off before stopping"
            ),
        }
    }

    /// The target and the leader it reported, or `None` when this node
    /// does not lead (or is the only voter).
    async fn hand_off(self: &Arc<Self>) -> Result<Option<(NodeId, Option<NodeId>)>, String> {
        let me = self.node_id;
        let mut metrics = self.raft.metrics();
        let voters: Vec<NodeId> = {
            let m = metrics.borrow_watched();
            if !leads_now(&m, me) {
                return Ok(None);
            }
            m.membership_config
                .membership()
                .voter_ids()
                .filter(|id| *id != me)
                .collect()
        };
        if voters.is_empty() {
            return Ok(None);
        }
        let held_at = held_at(&self.raft, &mut metrics).await?;
        let target =
            wait_caught_up::<MetaRaft>(&mut metrics, held_at, None, &voters, CATCH_UP).await?;
        let config = self.raft.config().clone();
        wait_out_own_lease(
            &self.raft,
            Duration::from_millis(config.election_timeout_max),
        )
        .await?;
        // Two candidates raising the term in turn can starve each other;
        // this node is stopping, so it simply stays out.
        self.raft.runtime_config().elect(false);
        // A task of its own: over the in-process transport the target's
        // campaign runs inside this call, and it must go on after this
        // node stops waiting.
        let ask = {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                this.forward(target, &MetaRequest::Campaign { from: me })
                    .await
            })
        };
        // About what a campaign needs when this node can still vote.
        let wait = Duration::from_millis(config.election_timeout_max + config.heartbeat_interval);
        let leader = match tokio::time::timeout(wait, ask).await {
            Ok(Ok(MetaReply::Elected(leader))) => Some(leader),
            Ok(Ok(other)) => return Err(format!("node {target} did not win: {other:?}")),
            Ok(Err(join)) => return Err(join.to_string()),
            Err(_) => None,
        };
        Ok(Some((target, leader)))
    }

    /// On the target of a hand-off from `from`: campaign until this node
    /// leads or another new leader is known.
    pub(super) async fn campaign_for(&self, from: NodeId) -> MetaReply {
        let config = self.raft.config();
        // The other voters grant only once their lease ran out, then an
        // election; retried every half election time-out.
        let limit =
            Duration::from_millis(config.election_timeout_max * 3 + config.heartbeat_interval);
        let retry = Duration::from_millis((config.election_timeout_min / 2).max(50));
        match campaign(&self.raft, self.node_id, from, limit, retry).await {
            Ok(leader) => MetaReply::Elected(leader),
            Err(reason) => MetaReply::Refused(reason),
        }
    }
}
