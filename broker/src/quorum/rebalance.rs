//! Leaderships back to their preferred nodes.
//!
//! Every queue's replica set names a preferred leader (its first member),
//! and placement spreads those evenly when queues are declared; a new
//! group's first leader is that node. A crash or a graceful stop moves
//! leaderships to the other nodes, and nothing moved them back: after one
//! node's restart the other two led everything, so the next loss of one of
//! them left about two thirds of the groups to elect instead of a third
//! (at 10,000 queues the survivors' elections are CPU-bound, and the
//! fail-over took twice as long), and the leaders' work sat on two nodes
//! of three.
//!
//! So each node, every `leader_rebalance_interval_ms`, hands the groups it
//! leads back to their preferred leader (`handoff.rs`'s hand-off, at most
//! [`PARALLEL`] at once), where it led the group in the same term at the
//! pass before (a leadership just moved here, by an operator whose move
//! the metadata is still recording, say, stays a while), and that node
//! - is a voter of the group, and alive by node-level liveness
//!   (`peer_liveness.rs`) for at least [`SETTLE_INTERVALS`] intervals
//!   since its start, so a node that comes and goes is not handed
//!   leaderships it is about to drop again, and one just restarted
//!   catches up on its queues first;
//! - has the group's log up to within [`SLACK`] entries (the hand-off waits
//!   for the rest with the proposals held; one far behind would pause the
//!   queue's publishing for the whole wait and then fail).
//!
//! A pass looks at every group the node has and every queue's replica
//! set, so it runs only when there may be something to move: after a
//! peer was heard again (`PeerLiveness`'s revivals), while the last pass
//! found groups led here whose preferred node is alive, and otherwise
//! once every [`FULL_PASS_EVERY`] (an election that moved a leadership
//! with every node alive).
//!
//! The preferred leader is the one an operator picks with
//! `move_leadership` (it records it), so the rebalance never undoes one.
//! A node that is stopping neither starts hand-offs nor takes transfers
//! (`rpc.rs`). Like Kafka's automatic preferred-leader election, it trades
//! a short pause of each moved queue's publishing (the hand-off's) for
//! balanced leaders.
//!
//! What it must not know: how a hand-off works, or how liveness is
//! judged; it only picks which groups to hand off and when.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use openraft::async_runtime::watch::WatchReceiver;

use super::cluster_view::ReplicaSets;
use super::node::QuorumNode;
use super::peer_liveness::PeerState;
use super::placement::leads;
use super::queue::QuorumQueue;
use crate::net::NodeId;
use crate::queue::Queue;

/// Hand-offs one node runs at once.
const PARALLEL: usize = 16;

/// How many intervals a preferred node must have run (since its start)
/// before leaderships go back to it. At 10,000 queues a restarted node
/// serves every queue about 14 s after its start; hand-backs 10 s after
/// the start overlapped that, and it took 18.6-18.8 s instead.
const SETTLE_INTERVALS: u32 = 3;

/// How often a node passes over its groups when nothing suggests there is
/// anything to move.
const FULL_PASS_EVERY: Duration = Duration::from_secs(120);

/// How far behind the leader's last log index the preferred leader may be
/// for its group to be handed to it this pass.
const SLACK: u64 = 64;

/// The rebalance's hand-offs since this node started, as
/// [`QuorumNode::leader_rebalance`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaderRebalance {
    /// Leaderships handed back to their preferred node.
    pub moved: u64,
    /// Hand-offs that did not complete (this node still led, or the group
    /// went away meanwhile).
    pub failed: u64,
}

/// The counters behind [`LeaderRebalance`].
#[derive(Debug, Default)]
pub(super) struct RebalanceCounts {
    moved: AtomicU64,
    failed: AtomicU64,
}

impl QuorumNode {
    /// The leaderships this node handed back to their preferred node
    /// since it started, and the attempts that failed.
    pub fn leader_rebalance(&self) -> LeaderRebalance {
        LeaderRebalance {
            moved: self.rebalance.moved.load(Ordering::Relaxed),
            failed: self.rebalance.failed.load(Ordering::Relaxed),
        }
    }
}

/// Start the node's rebalance (nothing when `every` is zero); it ends when
/// the node stops or goes away.
pub(super) fn spawn(node: Weak<QuorumNode>, sets: Arc<dyn ReplicaSets>, every: Duration) {
    if every.is_zero() {
        return;
    }
    tokio::spawn(async move {
        let mut led_before = HashMap::new();
        let mut revivals = None;
        let mut pending = true;
        let mut last_pass = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(every).await;
            let Some(node) = node.upgrade() else { return };
            if node.stopping.load(Ordering::Acquire) {
                return;
            }
            let revived = Some(*node.liveness.revived.borrow());
            if !pending && revived == revivals && last_pass.elapsed() < FULL_PASS_EVERY {
                continue;
            }
            revivals = revived;
            last_pass = tokio::time::Instant::now();
            let settle = every * SETTLE_INTERVALS;
            let (moves, waiting) = due(&node, sets.as_ref(), settle, &mut led_before);
            pending = waiting;
            if !moves.is_empty() {
                tracing::info!(
                    count = moves.len(),
                    "handing leaderships back to their preferred nodes"
                );
                hand_back(&node, moves).await;
            }
        }
    });
}

/// The groups this node leads that are due to go to their preferred
/// leader now, with that node, and whether it leads any group whose
/// preferred node is alive (due now or later). `led_before`: the groups
/// this node led at the last pass that another node is the preferred
/// leader of, with their term; replaced by this pass's.
fn due(
    node: &QuorumNode,
    sets: &dyn ReplicaSets,
    settle: Duration,
    led_before: &mut HashMap<String, u64>,
) -> (Vec<(Arc<QuorumQueue>, NodeId)>, bool) {
    let me = node.node_id;
    let preferred: HashMap<String, NodeId> = sets
        .all()
        .into_iter()
        .filter_map(|set| Some((set.name, *set.members.first()?)))
        .collect();
    // Per preferred node: alive, and alive for `settle` since its start.
    let mut ready: HashMap<NodeId, (bool, bool)> = HashMap::new();
    let mut led_now = HashMap::new();
    let mut waiting = false;
    let moves = node
        .queues()
        .into_iter()
        .filter(|queue| leads(queue, me))
        .filter_map(|queue| {
            let name = queue.address().name();
            let to = *preferred.get(name)?;
            if to == me {
                return None;
            }
            let (alive, settled) =
                *ready
                    .entry(to)
                    .or_insert_with(|| match node.liveness.state(to) {
                        PeerState::Alive { up_since, .. } => (true, up_since.elapsed() >= settle),
                        PeerState::Lost { .. } => (false, false),
                    });
            waiting |= alive;
            let term = queue.raft_status().term;
            led_now.insert(name.to_owned(), term);
            let led_at_the_last_pass = led_before.get(name) == Some(&term);
            (led_at_the_last_pass && settled && near_the_log(&queue, to)).then_some((queue, to))
        })
        .collect();
    *led_before = led_now;
    (moves, waiting)
}

/// Whether `to` is a voter of the group and its log within [`SLACK`] of
/// this leader's.
fn near_the_log(queue: &QuorumQueue, to: NodeId) -> bool {
    let metrics = queue.metrics();
    let m = metrics.borrow_watched();
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|id| id == to)
    {
        return false;
    }
    let (Some(last), Some(replication)) = (m.last_log_index, m.replication.as_ref()) else {
        return false;
    };
    replication
        .get(&to)
        .and_then(|matched| matched.as_ref())
        .is_some_and(|matched| matched.index + SLACK >= last)
}

/// Hand each group to its preferred leader, [`PARALLEL`] at a time,
/// stopping early if the node starts to stop.
async fn hand_back(node: &QuorumNode, moves: Vec<(Arc<QuorumQueue>, NodeId)>) {
    futures_util::stream::iter(moves)
        .for_each_concurrent(PARALLEL, |(queue, to)| async move {
            if node.stopping.load(Ordering::Acquire) || !leads(&queue, node.node_id) {
                return;
            }
            match node.hand_off(&queue, Some(to), false).await {
                Ok(done) => {
                    node.rebalance.moved.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%done, "leadership back with its preferred node");
                }
                Err(error) => {
                    node.rebalance.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(%error, "leadership not handed back to its preferred node");
                }
            }
        })
        .await;
}
