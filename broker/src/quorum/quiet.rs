//! Quiet groups: an idle quorum queue's leader stops heartbeating, and
//! its followers go on without the heartbeats, trusting node-level
//! liveness (`peer_liveness.rs`) instead. At 10,000 queues the heartbeats
//! of every group were most of an idle cluster's work.
//!
//! The rules (applied by the node's driver, `follower_tick.rs`, at each
//! visit of a replica):
//! - A leader is quiet while its last entry has been applied here for
//!   [`QUIET_AFTER`], and every voter whose node is alive holds the
//!   last entry (openraft's replication metrics) and
//!   acknowledged a heartbeat sent after that entry was applied here (so it
//!   knows it committed) and after the voter's node was seen in its
//!   current incarnation (a restarted voter hears from its leader first).
//!   A quiet leader's heartbeats are not triggered. Anything else wakes it
//!   at once: a write (openraft replicates it without a heartbeat; the
//!   next visit sees the log moved), a voter's node restarted.
//!   A voter whose node is lost does not keep the leader awake, as long
//!   as the settled voters with the leader are a majority (a joint
//!   membership excepted): the leader's heartbeats cannot reach it, and
//!   the live ones know their leader lives from node liveness. The
//!   forwarding's cut-off reasoning (`forward/cut_off.rs`) reads a
//!   follower's leader contact with that vouch (`leader_contact`), so a
//!   node cut from the leader alone still learns the leader lives.
//! - A follower goes without its tick while its leader's node is alive
//!   and it heard that leader in the node's current incarnation (and the
//!   leader still is a voter): it knows its leader lives. When the
//!   leader's node is lost (or restarted), one surviving voter, the
//!   group's [`successor`], gets its tick back at once and elects at its
//!   first tick (openraft's election timer counts from the last contact,
//!   long past in a quiet group); the others wait an election time-out
//!   more, so the two do not split the vote.
//! - Check-quorum (`leadership_watch.rs`): a quiet leader has no fresh
//!   acknowledgements, so it is vouched for by its voters' nodes: its
//!   stamp is the last moment each was heard in the incarnation that
//!   acknowledged it, read from the liveness when asked (a settled replica
//!   is not visited, `visits.rs`), and a leader serves while its
//!   quorum's acknowledgement or that stamp is within the window. Woken
//!   by a write, the stamp stops moving: the window counts from the wake,
//!   never from the last acknowledgement before the group went quiet
//!   (counting from that, groups woken together by a burst of publishes
//!   stopped serving and released publishes whose entries later
//!   committed). Woken by a voter's return alone, its log still, a leader
//!   whose settled voters are a majority stays vouched for by them while
//!   it heartbeats the returning one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::peer_liveness::{PeerLiveness, PeerState};
use super::visits::Visits;
use crate::net::NodeId;
use crate::raft::leadership::Metrics;
use crate::raft::GroupId;

use super::types::QueueRaft;

/// How long a leader's log must have stood still before it goes quiet.
pub(super) const QUIET_AFTER: Duration = Duration::from_secs(2);

/// One group's quiet state on this node.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    /// The node's liveness (set when the group opens on a node).
    liveness: OnceLock<Arc<PeerLiveness>>,
    /// The node's list of replicas to visit, and this group's id on it.
    visits: OnceLock<(Arc<Visits>, GroupId)>,
    /// On the visit list (`visits.rs`).
    listed: AtomicBool,
    /// The leader's view of its log, for the rule above.
    state: Mutex<LeaderState>,
    /// Milliseconds after [`clock_base`], plus one, of the last moment
    /// this leader was known quiet with its voters alive (0: never).
    vouched_ms: AtomicU64,
}

#[derive(Debug, Default)]
struct LeaderState {
    /// The last log index applied here, as of `since`.
    index: Option<u64>,
    since: Option<Instant>,
    quiet: bool,
    /// The other voters, and when the last visit found it quiet (their
    /// nodes' incarnations then had acknowledged it).
    voters: Vec<NodeId>,
    quiet_at: Option<Instant>,
    /// Told to quiesce in this quiet spell (`take_quiesce`).
    quiesced: bool,
}

/// What the quiet-group clock counts from.
fn clock_base() -> std::time::Instant {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    *BASE.get_or_init(std::time::Instant::now)
}

fn now_ms() -> u64 {
    clock_base().elapsed().as_millis() as u64 + 1
}

/// `at` on the quiet-group clock.
fn ms_of(at: Instant) -> u64 {
    at.into_std()
        .saturating_duration_since(clock_base())
        .as_millis() as u64
        + 1
}

impl Quiet {
    /// Quiet state of `group` using the node's `liveness`; on the node's
    /// visit list from the start.
    pub(crate) fn new(liveness: Arc<PeerLiveness>, visits: Arc<Visits>, group: GroupId) -> Quiet {
        let quiet = Quiet::default();
        let _ = quiet.liveness.set(liveness);
        let _ = quiet.visits.set((visits, group));
        quiet.wake();
        quiet
    }

    /// Put the replica back on the node's visit list, unless it is on it.
    pub(crate) fn wake(&self) {
        if !self.listed.swap(true, Ordering::AcqRel) {
            if let Some((visits, group)) = self.visits.get() {
                visits.join(*group);
            }
        }
    }

    /// Taken off the list by the driver, before it looks at the replica
    /// (a wake from then on lists it again).
    pub(super) fn unlist(&self) {
        self.listed.store(false, Ordering::Release);
    }

    /// Kept on the list by the driver.
    pub(super) fn relist(&self) {
        self.listed.store(true, Ordering::Release);
    }

    /// The node's liveness, if the group runs on a node.
    pub(crate) fn liveness(&self) -> Option<&Arc<PeerLiveness>> {
        self.liveness.get()
    }

    /// Whether this leader was known quiet, its voters alive, within the
    /// last `window_ms`. A quiet leader is not visited (`visits.rs`): its
    /// stamp is brought up to the last moment every voter's node was
    /// heard in the incarnation that acknowledged it, here and at its
    /// wake.
    pub(crate) fn vouched_within(&self, window_ms: u64) -> bool {
        {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            self.refresh_vouch(&state);
        }
        let at = self.vouched_ms.load(Ordering::Relaxed);
        at != 0 && now_ms().saturating_sub(at) <= window_ms
    }

    /// While quiet: stamp the last moment every other voter was heard
    /// alive in an incarnation seen before the leader went quiet.
    fn refresh_vouch(&self, state: &LeaderState) {
        let (true, Some(quiet_at), Some(liveness)) =
            (state.quiet, state.quiet_at, self.liveness.get())
        else {
            return;
        };
        if let Some(at) = liveness.heard_all_since(&state.voters, quiet_at) {
            self.vouched_ms.fetch_max(ms_of(at), Ordering::Relaxed);
        }
    }

    /// This leader's quiet state in words, for the log line of a leader
    /// that stops serving.
    pub(crate) fn describe(&self) -> String {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let vouched = self.vouched_ms.load(Ordering::Relaxed);
        let heard = match (state.quiet_at, self.liveness.get()) {
            (Some(at), Some(liveness)) => liveness
                .heard_all_since(&state.voters, at)
                .map(|t| format!("{:?} ago", t.elapsed())),
            _ => None,
        };
        format!(
            "quiet={} quiet_for={:?} voters={:?} voters_heard={:?} vouched_ms_ago={} listed={}",
            state.quiet,
            state.quiet_at.map(|t| t.elapsed()),
            state.voters,
            heard,
            if vouched == 0 {
                -1
            } else {
                now_ms().saturating_sub(vouched) as i64
            },
            self.listed.load(Ordering::Relaxed),
        )
    }

    /// Whether the leader was quiet at the last visit.
    pub(crate) fn is_quiet(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).quiet
    }

    /// Whether a quiet leader is yet to be told to quiesce in this quiet
    /// spell (then it counts as told). Once per spell: the core's pass for
    /// it changes the leader's metrics, which lists it again, and the
    /// visit that follows would tell it again, and so on.
    pub(super) fn take_quiesce(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let take = state.quiet && !state.quiesced;
        state.quiesced |= take;
        take
    }

    /// A visit of this node's leader replica: whether it is quiet (its
    /// heartbeat is then not triggered).
    pub(super) fn leader_visit(&self, m: &Metrics<QueueRaft>, me: NodeId) -> bool {
        let Some(liveness) = self.liveness.get() else {
            return false;
        };
        let now = Instant::now();
        let last = m.last_log_index;
        let applied = m.last_applied.map(|l| l.index);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.index != last || applied != last || state.since.is_none() {
            // Woken: the check-quorum window counts from here.
            self.refresh_vouch(&state);
            state.index = last;
            state.since = (applied == last).then_some(now);
            state.quiet = false;
            state.quiesced = false;
            return false;
        }
        let Some(since) = state.since else {
            return false;
        };
        let settled = (now.saturating_duration_since(since) >= QUIET_AFTER)
            .then(|| settled_quorum(m, me, last, since, liveness))
            .flatten();
        let quiet = settled.as_ref().is_some_and(|s| s.quiet);
        if settled.is_none() {
            self.refresh_vouch(&state);
        }
        state.quiet = quiet;
        state.quiesced &= quiet;
        if let Some(settled) = settled {
            // Settled by a majority: vouched for, quiet or not. Awake
            // because a voter came back (its new incarnation not yet
            // acknowledging), the leader is visited, and this keeps its
            // stamp fresh: the restart of one voter no longer sent
            // thousands of leaders past the check-quorum window while the
            // heartbeats to it queued up.
            state.quiet_at = Some(now);
            state.voters = settled.voters;
            self.vouched_ms.store(now_ms(), Ordering::Relaxed);
        }
        quiet
    }
}

/// What the other voters allow a leader whose log stood still.
struct Settled {
    /// The settled ones ([`voter_settled`]); with the leader, a majority.
    voters: Vec<NodeId>,
    /// No other voter's node is alive without being settled: the leader
    /// may stop heartbeating.
    quiet: bool,
}

/// The other voters that vouch for this leader, if they and this node are
/// a majority (a joint configuration, a membership change, needs every
/// voter). It may go quiet if every other voter is settled or lost. A lost
/// voter does not keep the group awake: with it down, its leader's
/// heartbeats reach only voters that know their leader lives anyway (node
/// liveness), and at 10,000 groups they were what overloaded the
/// survivors of a restart. Its new incarnation, once seen, wakes the group
/// (`visits.rs`), and the leader brings it up to date before it goes
/// quiet again.
fn settled_quorum(
    m: &Metrics<QueueRaft>,
    me: NodeId,
    last: Option<u64>,
    since: Instant,
    liveness: &PeerLiveness,
) -> Option<Settled> {
    let membership = m.membership_config.membership();
    let joint = membership.get_joint_config().len() > 1;
    let mut settled = Vec::new();
    let mut voters = 0usize;
    let mut quiet = true;
    for v in membership.voter_ids() {
        voters += 1;
        if v == me {
            continue;
        }
        let state = liveness.state(v);
        if voter_settled(m, v, last, since, state) {
            settled.push(v);
        } else if joint {
            return None;
        } else if state.is_alive() {
            quiet = false;
        }
    }
    // This node and the settled others: a majority of the voters.
    (2 * (settled.len() + 1) > voters).then_some(Settled {
        voters: settled,
        quiet,
    })
}

/// Whether voter `v` lets its leader go quiet: its node alive, holding
/// the last entry `last`, and it acknowledged a heartbeat sent after
/// `since` and after its node's current incarnation was first seen.
fn voter_settled(
    m: &Metrics<QueueRaft>,
    v: NodeId,
    last: Option<u64>,
    since: Instant,
    state: PeerState,
) -> bool {
    let PeerState::Alive { up_since, .. } = state else {
        return false;
    };
    let matched = m
        .replication
        .as_ref()
        .and_then(|r| r.get(&v).cloned().flatten())
        .map(|l| l.index);
    // openraft's instants convert to nothing: compare ages.
    let acked_ago = m
        .heartbeat
        .as_ref()
        .and_then(|h| h.get(&v).cloned().flatten())
        .map(|t| openraft::Instant::elapsed(&*t));
    // The voter's own evidence that this leader lives (its contact with
    // it, `peer_liveness::vouch`) counts only from when the voter learned
    // this node's incarnation, which is when this node learned the
    // voter's, give or take a probe's answer in flight: the acknowledged
    // heartbeat must come [`SEEN_BY_VOTER`] after. One acknowledged just
    // before left a freshly created group's follower without that
    // evidence: it took its tick back and campaigned against its quiet
    // leader.
    let seen = up_since.elapsed().saturating_sub(SEEN_BY_VOTER);
    matched == last && acked_ago.is_some_and(|ago| ago < since.elapsed() && ago < seen)
}

/// How long after this node first heard a peer's incarnation the peer
/// surely knows this node's (the answer to a liveness probe in flight).
const SEEN_BY_VOTER: Duration = Duration::from_secs(1);

/// The voter that elects at once when `leader` is lost: one of the
/// others whose node is alive (this node counts as alive), picked by the
/// group's name, so the groups of a lost node spread over the survivors.
pub(super) fn successor(
    name: &str,
    voters: impl Iterator<Item = NodeId>,
    leader: NodeId,
    me: NodeId,
    liveness: &PeerLiveness,
) -> Option<NodeId> {
    let alive: Vec<NodeId> = voters
        .filter(|v| *v != leader && (*v == me || liveness.state(*v).is_alive()))
        .collect();
    if alive.is_empty() {
        return None;
    }
    let hash = crate::raft::group_id(name);
    Some(alive[(hash % alive.len() as u64) as usize])
}

/// Whether a follower whose leader is `leader` (lost, or restarted since
/// their last contact) may elect now: at once if it is the group's
/// successor, an election time-out after the loss otherwise.
pub(super) fn may_elect(
    name: &str,
    voters: impl Iterator<Item = NodeId>,
    leader: NodeId,
    me: NodeId,
    liveness: &PeerLiveness,
    election_min: Duration,
) -> bool {
    let lost_at = match liveness.state(leader) {
        PeerState::Lost { lost_at } => lost_at,
        PeerState::Alive { up_since, .. } => up_since,
    };
    lost_at.elapsed() >= election_min || successor(name, voters, leader, me, liveness) == Some(me)
}

impl super::queue::QuorumQueue {
    /// Whether this replica leads the group quietly (no heartbeats), as
    /// of the node's last visit of it.
    pub fn is_quiet(&self) -> bool {
        self.is_leading() && self.shared.quiet.is_quiet()
    }

    /// How long ago this replica last took an AppendEntries (a heartbeat
    /// included) from its leader, if it ever did.
    pub fn last_append_age(&self) -> Option<Duration> {
        self.heard_contact().map(|(_, age)| age)
    }

    /// The index of the last log entry the group's data metrics show once
    /// they do, waited for up to `limit`. Openraft makes that channel on
    /// the first request and has its core fill it in (vendor/README.md): a
    /// quiet group's core makes no pass of its own for it.
    pub async fn data_metrics_last_log(&self, limit: Duration) -> Option<u64> {
        use openraft::async_runtime::watch::WatchReceiver;
        let mut data = self.raft.data_metrics();
        let filled = async {
            loop {
                if let Some(log) = data.borrow_watched().last_log {
                    return Some(log.index);
                }
                data.changed().await.ok()?;
            }
        };
        tokio::time::timeout(limit, filled).await.ok().flatten()
    }

    /// A quiet leader's proposer and settlement batcher end if idle (the
    /// next publish or settlement starts them again, `task_queue.rs`).
    pub(super) fn park_idle_tasks(&self) {
        self.proposal_tx.park_if_idle();
        self.settle_tx.park_if_idle();
    }

    /// Whether this replica's proposer runs: from its first publish until
    /// the queue goes quiet.
    pub fn proposer_running(&self) -> bool {
        self.proposal_tx.started()
    }
}

impl super::node::QuorumNode {
    /// How many connections of this node's groups to their peers are
    /// open: about 0 in an idle cluster, where every quiet leader closed
    /// its replication streams and heartbeat workers (quiesced by the
    /// node's driver, `follower_tick.rs`).
    pub fn raft_clients_open(&self) -> usize {
        self.raft_clients.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stamp_counts_only_within_its_window() {
        let quiet = Quiet::default();
        assert!(!quiet.vouched_within(3000));
        quiet.vouched_ms.store(now_ms(), Ordering::Relaxed);
        assert!(quiet.vouched_within(3000));
        assert!(quiet.vouched_within(0) || now_ms() > 1);
    }

    #[tokio::test]
    async fn the_lost_leaders_groups_spread_over_the_alive_voters() {
        let liveness = PeerLiveness::new(Duration::from_secs(1));
        let pick = |live: &PeerLiveness, i: usize| {
            successor(&format!("q{i}"), [1, 2, 3].into_iter(), 1, 2, live)
        };
        // Node 3 never heard from: this node (2) takes every group.
        assert!((0..20).all(|i| pick(&liveness, i) == Some(2)));
        liveness.heard(3, 5, true);
        let mut counts = [0usize; 4];
        for i in 0..100 {
            counts[pick(&liveness, i).unwrap() as usize] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > 20 && counts[3] > 20, "{counts:?}");
        // The leader alone: nobody to take over.
        assert_eq!(successor("q", [1].into_iter(), 1, 2, &liveness), None);
    }
}
