//! Leadership hand-off: moving a queue's leadership for maintenance
//! ([`QuorumNode::move_leadership`]) and on a graceful stop
//! ([`QuorumNode::shutdown`]).
//!
//! On openraft 0.10 the hand-off is its `transfer_leader`:
//!
//! 1. the leader holds its proposer and settlement batcher (publishes
//!    wait in order) and waits out the proposals already on their way
//!    (`hold.rs`), so its log stops growing at a known index;
//! 2. waits (bounded, [`CATCH_UP`]) until the target has matched its last
//!    log index (and it has applied it): openraft's target refuses to
//!    take over with a shorter log;
//! 3. `trigger().transfer_leader(target)`: the leader drops its lease and
//!    tells every voter (`RpcKind::TransferLeader`); the voters drop
//!    theirs and the target starts an election at once, which every
//!    voter grants;
//! 4. waits (bounded) until it no longer leads, then lets the held
//!    batches go: they fail with "not leader" and the publishers hear
//!    `released`, so their routed queues send them again to the new
//!    leader.
//!
//! On 0.9 there was no transfer: the leader waited out its own lease and
//! asked the target to campaign (a `Request::Elect` over the forwarding
//! protocol, `QuorumNode::campaign`, still answered for a node that asks
//! it). The transfer needs neither the wait nor the extra round trip.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use super::node::{QuorumError, QuorumNode};
use super::placement::leads;
use super::queue::QuorumQueue;
use super::stop_snapshot;
use super::types::{Command, QueueRaft, SettleKind};
use crate::net::NodeId;
use crate::queue::{Queue, QueueAddress};
use openraft::async_runtime::watch::WatchReceiver;

use crate::raft::leadership::{campaign, held_at, leads_now, wait_caught_up};

/// How long the leader waits for the target to match its log.
const CATCH_UP: Duration = Duration::from_secs(2);
/// How long a graceful stop flushes settlements before handing off.
const FLUSH: Duration = Duration::from_secs(2);
/// How long a graceful stop spends on the groups' snapshots, after the
/// hand-offs.
const STOP_SNAPSHOT: Duration = Duration::from_secs(3);

/// What a hand-off did.
#[derive(Debug, Clone)]
pub struct HandOff {
    /// The queue's address.
    pub queue: String,
    /// The node asked to take over.
    pub target: NodeId,
    /// Who leads afterwards, if known.
    pub leader: Option<NodeId>,
    /// From holding the proposals to this node no longer leading.
    pub pause: Duration,
}

impl std::fmt::Display for HandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: asked node {} to lead; leader now {:?}; publishing paused {} ms",
            self.queue,
            self.target,
            self.leader,
            self.pause.as_millis()
        )
    }
}

impl QuorumNode {
    /// Hand the leadership of `queue` (every queue this node leads when
    /// `None`) to `to` (the most up-to-date follower when `None`). A
    /// summary on success, one line per queue. The metadata records the
    /// new leader (the target, if given) as the preferred leader.
    pub async fn move_leadership(
        &self,
        queue: Option<&str>,
        to: Option<NodeId>,
    ) -> Result<String, QuorumError> {
        let queues: Vec<Arc<QuorumQueue>> = match queue {
            Some(name) => {
                let address = QueueAddress::parse(&format!("/quorum/{name}"))
                    .map_err(|e| QuorumError::NoSuchQueue(format!("{name}: {e}")))?;
                vec![self
                    .get(&address)
                    .ok_or_else(|| QuorumError::NoSuchQueue(address.to_string()))?]
            }
            None => self
                .queues()
                .into_iter()
                .filter(|q| leads(q, self.node_id))
                .collect(),
        };
        if queues.is_empty() {
            return Ok(format!("node {} leads no quorum queue", self.node_id));
        }
        let mut lines = Vec::new();
        for queue_ref in &queues {
            match self.hand_off(queue_ref, to, false).await {
                Ok(done) => {
                    lines.push(done.to_string());
                    // The new leader if known, else the node asked to
                    // lead; recorded even without a target, so the
                    // rebalance (`rebalance.rs`) does not hand it back.
                    let now_leads = done.leader.unwrap_or(done.target);
                    let sets = self
                        .replica_sets
                        .get()
                        .filter(|_| now_leads != self.node_id);
                    if let Some(sets) = sets {
                        let name = queue_ref.address().name();
                        if let Err(error) = sets.set_preferred_leader(name, now_leads).await {
                            tracing::warn!(queue = %queue_ref.address(), %error,
                                "preferred leader not recorded");
                        }
                    }
                }
                // One named queue: its error is the answer.
                Err(error) if queue.is_some() => return Err(error),
                Err(error) => lines.push(format!("{}: {error}", queue_ref.address())),
            }
        }
        Ok(lines.join("\n"))
    }

    /// Hand the leadership of `queue` to `to` (or the most up-to-date
    /// voter): see the module documentation. `stopping`: this node shuts
    /// the group down right after, so it only waits (bounded by about a
    /// lease) for the campaign's answer and not for its own step-down;
    /// the campaign goes on without it.
    pub(crate) async fn hand_off(
        &self,
        queue: &Arc<QuorumQueue>,
        to: Option<NodeId>,
        stopping: bool,
    ) -> Result<HandOff, QuorumError> {
        let me = self.node_id;
        let address = queue.address().to_string();
        let fail = |reason: String| QuorumError::HandOff {
            queue: address.clone(),
            reason,
        };
        let voters: Vec<NodeId> = {
            let metrics = queue.metrics();
            let m = metrics.borrow_watched();
            if !(m.state == ServerState::Leader && m.current_leader == Some(me)) {
                return Err(QuorumError::NotLeader(address.clone(), m.current_leader));
            }
            m.membership_config
                .membership()
                .voter_ids()
                .filter(|id| *id != me)
                .collect()
        };
        if let Some(to) = to {
            if to == me {
                return Ok(HandOff {
                    queue: address,
                    target: me,
                    leader: Some(me),
                    pause: Duration::ZERO,
                });
            }
            if !voters.contains(&to) {
                return Err(fail(format!(
                    "node {to} is not a voter (voters {voters:?})"
                )));
            }
        }
        if voters.is_empty() {
            return Err(fail("no other voter".into()));
        }
        let started = Instant::now();
        queue.hold_proposals().await;
        let result = self
            .hand_off_held(queue, to, &voters, &address, stopping)
            .await;
        let pause = started.elapsed();
        // A stopping node keeps holding: a batch appended now would make
        // its log longer than the target's and cost the target the vote.
        // The held batches are answered `released` when the queue goes.
        // (Also when the node began to stop during a rebalance's hand-off:
        // the stop's own hand-off of this group may hold it now.)
        if !stopping && !self.stopping.load(Ordering::Acquire) {
            queue.release_proposals();
        }
        let (target, leader) = result.map_err(fail)?;
        tracing::info!(queue = %address, target, ?leader, pause_ms = pause.as_millis() as u64, "leadership handed off");
        Ok(HandOff {
            queue: address,
            target,
            leader,
            pause,
        })
    }

    /// Steps 2-4 with the proposals held: the target and the new leader.
    async fn hand_off_held(
        &self,
        queue: &Arc<QuorumQueue>,
        to: Option<NodeId>,
        voters: &[NodeId],
        address: &str,
        stopping: bool,
    ) -> Result<(NodeId, Option<NodeId>), String> {
        let me = self.node_id;
        let mut metrics = queue.metrics();
        // openraft 0.10's target takes a transfer only once its flushed log
        // reaches the leader's last log id, and a replica restarted since
        // its last log write has no flushed log id at all (`IOState::new`)
        // until an entry reaches it: a follower that caught up by a
        // snapshot before a restart refused every transfer (crash test
        // `install-recorded`). An empty settlement (applied as nothing)
        // makes sure one does; `wait_caught_up` below waits for it there.
        // Bounded: a leader cut off from its quorum commits nothing.
        let empty = Command::Settle {
            ids: Vec::new(),
            kind: SettleKind::Remove,
        };
        super::submit::lease_acknowledged(&queue.raft).await;
        tokio::time::timeout(self.transfer_limit(), queue.raft.client_write(empty))
            .await
            .map_err(|_| "no quorum for an entry before the transfer".to_string())?
            .map_err(|e| format!("no entry before the transfer: {e}"))?;
        // The last proposals submitted before the hold may still be queued
        // for openraft's core: see `held_at`.
        let held_at = held_at(&queue.raft, &mut metrics).await?;
        let target =
            wait_caught_up::<QueueRaft>(&mut metrics, held_at, to, voters, CATCH_UP).await?;
        queue
            .raft
            .trigger()
            .transfer_leader(target)
            .await
            .map_err(|e| format!("the group stopped: {e}"))?;
        // Release the held batches only once this node has stepped down,
        // so they are refused instead of appended at the old term.
        let limit = self.transfer_limit();
        let stepped_down = tokio::time::timeout(limit, async {
            loop {
                if !leads_now(&metrics.borrow_and_update(), me) {
                    return;
                }
                if metrics.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        let leader = metrics.borrow_watched().current_leader.filter(|l| *l != me);
        match stepped_down {
            Ok(()) => Ok((target, leader)),
            // The group is shut down next; the target may still win.
            Err(_) if stopping => Ok((target, None)),
            Err(_) => {
                tracing::warn!(queue = %address, target, "target did not take over");
                Err(format!(
                    "node {target} did not take over within {limit:?}; still leading"
                ))
            }
        }
    }

    /// How long a transfer may take: the target's election, one vote
    /// round, with room for a busy node.
    fn transfer_limit(&self) -> Duration {
        Duration::from_millis(
            self.raft_config.election_timeout_max + self.raft_config.heartbeat_interval * 2,
        )
    }

    /// How long a campaign (0.9's hand-off, still answered) may take: the
    /// other voters' lease may have to run out first, then an election.
    fn campaign_limit(&self) -> Duration {
        Duration::from_millis(
            self.raft_config.election_timeout_max * 3 + self.raft_config.heartbeat_interval,
        )
    }

    /// On the target: campaign for `name`'s leadership, which `from` hands
    /// off, until this node leads or another new leader is known; bounded.
    pub(crate) async fn campaign(&self, name: &str, from: NodeId) -> Result<NodeId, QuorumError> {
        let address = QueueAddress::parse(&format!("/quorum/{name}"))
            .map_err(|e| QuorumError::NoSuchQueue(format!("{name}: {e}")))?;
        let queue = self
            .get(&address)
            .ok_or_else(|| QuorumError::NoSuchQueue(address.to_string()))?;
        campaign(
            &queue.raft,
            self.node_id,
            from,
            self.campaign_limit(),
            self.campaign_retry(),
        )
        .await
        .map_err(|reason| QuorumError::HandOff {
            queue: address.to_string(),
            reason,
        })
    }

    /// How often a target repeats its campaign: long enough for a vote
    /// round trip, short enough to retry soon after the other voters'
    /// lease ran out.
    pub(crate) fn campaign_retry(&self) -> Duration {
        Duration::from_millis((self.raft_config.election_timeout_min / 2).max(50))
    }

    /// Stop every group (the node is shutting down, e.g. on SIGTERM):
    /// flush settlements, hand the leadership of every group this node
    /// leads to a caught-up follower, snapshot what each replica applied
    /// (all groups at once, each step bounded), then shut the Raft groups
    /// down.
    pub async fn shutdown(self: &Arc<Self>) {
        self.stopping.store(true, Ordering::Release);
        self.log_store_stats();
        let queues = self.queues();
        // A stopping node stays out of every election (as the metadata
        // group's hand-off does): a group whose transfer did not produce a
        // leader at once was won back by this node at its next election
        // time-out (its followers refuse other candidates while it lives,
        // `vote_guard.rs`), then lost again when the node exited, an
        // election time-out after its loss was noticed. At 10,000 queues
        // that left some groups without a leader 12 s after a SIGTERM
        // (2 of 6 runs); the leaders stay with the candidates the
        // transfers started.
        for queue in &queues {
            queue.raft.runtime_config().elect(false);
        }
        let mut tasks = tokio::task::JoinSet::new();
        for queue in &queues {
            let queue = Arc::clone(queue);
            let node = self.clone();
            tasks.spawn(async move {
                queue.flush_settlements(FLUSH).await;
                // A group with no other voter (a single-node queue) has
                // no one to hand off to: nothing to report.
                if leads(&queue, node.node_id) && queue.voters().len() > 1 {
                    match node.hand_off(&queue, None, true).await {
                        Ok(done) => tracing::info!(%done, "handed off before stopping"),
                        Err(error) => tracing::warn!(%error, "no hand-off before stopping"),
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        // With the proposals held and the settlements flushed, what each
        // replica applied goes into a snapshot, so the next start has no
        // tail to replay (`stop_snapshot.rs`).
        stop_snapshot::snapshot_all(&queues, STOP_SNAPSHOT).await;
        for queue in queues {
            if let Err(error) = queue.raft.shutdown().await {
                tracing::warn!(queue = %queue.address(), %error, "raft shutdown");
            }
        }
        // Streams waiting on a lost peer end now, releasing the log store.
        self.liveness.close();
    }
}
