//! openraft's tick is switched off on a quorum replica that does not
//! need it: a follower that hears its leader, and a leader, whose
//! heartbeats this node's one driver task triggers instead. An idle group
//! then costs the heartbeats it sends and takes and little else.
//!
//! Why: openraft 0.10 ticks every `heartbeat_interval * 13 / 64` (101 ms
//! at our 500 ms; 0.9 ticked every 1.5 heartbeat intervals), and every
//! tick is a pass of the group's core loop that builds and sends its full
//! metrics, though a leader sends a heartbeat on one tick in five and a
//! follower's tick drives only its election timer. Measured on a 3-node
//! in-process cluster with 300 idle groups (debug build, CPU time of the
//! process, `examples/many_quorum_queues.rs`): 47% of a core with the tick
//! everywhere, 21% with this (14% on openraft 0.9).
//!
//! The driver visits every replica on the node's list (`visits.rs`: all
//! but the settled quiet ones) once a `heartbeat_interval`, spread evenly
//! over it ([`SLOTS`] slots, a replica's slot fixed by its group id:
//! triggering every leader's heartbeat at the same instant sent hundreds
//! of RPCs in a burst, and the last ones timed out). The rule:
//! - a follower whose current leader's last AppendEntries
//!   (`leader_contact.rs`, noted by the RPC handler) is younger than
//!   [`fresh_window`] goes without the tick. This never delays an
//!   election: openraft's election timer counts from the last contact with
//!   the leader (`Vote::is_expired`), not in ticks, so a tick switched back
//!   on finds the time-out already running, and the window plus a visit
//!   interval plus a tick is shorter than the shortest election time-out;
//! - a leader goes without the tick, and the driver triggers its
//!   heartbeat at each visit (`Trigger::heartbeat`), which is all a
//!   leader's tick does (`RaftCore::handle_tick`);
//! - a follower that granted its vote to a candidate whose node is alive
//!   goes without the tick for a while, waiting for that candidate to
//!   lead (`vote_guard.rs`);
//! - any other replica (candidate, learner, a follower that lost touch)
//!   ticks. One that becomes candidate gets its tick back at once
//!   (`leadership_watch.rs`);
//! - a follower or candidate that is the successor of a lost leader
//!   campaigns the moment that leader's lease runs out (`lease_ran_out`),
//!   and one whose leader's node was found not running takes over at
//!   once (`Visit::succeed`).
//!
//! Quiet groups (`quiet.rs`) extend both: a quiet leader's heartbeat is
//! not triggered, and a follower whose leader's node is alive by
//! node-level liveness (`peer_liveness.rs`) goes without its tick however
//! old its last AppendEntries.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Weak;
use std::time::Duration;

use futures_util::FutureExt;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::ServerState;
use tokio::time::Instant;

use super::node::QuorumNode;
use super::peer_liveness::PeerLiveness;
use super::queue::QuorumQueue;
use super::types::QueueRaftHandle;
use crate::net::NodeId;
use crate::queue::Queue;
use crate::raft::GroupId;

/// How many shortest election time-outs after its start a replica waits
/// for a live leader it has not heard from yet (20 s by default: a node
/// opens 10,000 groups in about that, and its peers wake theirs for it).
const STARTUP_WAIT_TIMEOUTS: u32 = 20;

/// How many longest election time-outs after granting its vote a
/// follower waits for the candidate to lead, its node alive, before it
/// campaigns itself (`vote_guard.rs`).
const GRANT_WAIT_TIMEOUTS: u64 = 2;

/// The slots a heartbeat interval is cut into.
const SLOTS: u64 = 8;

/// openraft's tick interval for `config`.
fn tick_interval(config: &openraft::Config) -> u64 {
    (config.heartbeat_interval * 13 / 64).max(1)
}

/// How recent the leader's last AppendEntries must be for a follower to
/// go without its tick: what is left of the shortest election time-out
/// after a visit interval (a heartbeat interval), a tick and a quarter
/// heartbeat interval of margin. Shorter than a heartbeat interval plus a
/// tick (the gap between two heartbeats), it never holds and followers
/// always tick: correct, only dearer.
pub(super) fn fresh_window(config: &openraft::Config) -> Duration {
    let hb = config.heartbeat_interval;
    Duration::from_millis(
        config
            .election_timeout_min
            .saturating_sub(hb + tick_interval(config) + hb / 4),
    )
}

/// What a replica here needs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// openraft's tick.
    Tick,
    /// Nothing: a follower that hears its leader. `settled` when its
    /// leader's node vouches for it (only a change in liveness, which
    /// wakes every replica, or in the group's leader changes that).
    Nothing { settled: bool },
    /// Its heartbeats, from the driver: a leader.
    Heartbeats,
    /// To take over at once from a leader whose node is not running, as
    /// the group's successor (`Visit::succeed`).
    Succeed,
    /// To campaign now, the lost leader's lease just run out
    /// ([`lease_ran_out`]).
    Campaign,
}

/// Whether this replica, follower or candidate, is the successor of a
/// leader whose node is lost and whose lease (`election_timeout_max`
/// after the last AppendEntries taken from it) ran out within the last
/// two visits. Then it campaigns at once (with a pre-vote: nothing is
/// disturbed if a quorum still hears that leader) instead of at its next
/// election time-out. Why: after a silent death (a host crash, a dropped
/// link: the node is not found not running, so no succession), a group
/// with recent traffic elected only at the first time-out after the other
/// voters' leases ran out: openraft's own timer fires 1.5-3 s after the
/// last contact, is refused while the leases hold, and fires again 1.5-3 s
/// later, 4.5-6 s in all. Only the first visits past the lease: a quiet
/// group, its leader heard long ago, elects at its first tick already.
fn lease_ran_out(
    queue: &QuorumQueue,
    m: &openraft::RaftMetrics<super::types::QueueRaft>,
    contact: Option<(NodeId, Duration)>,
    (me, timings, liveness): (NodeId, &Timings, &PeerLiveness),
) -> bool {
    if !matches!(m.state, ServerState::Follower | ServerState::Candidate) {
        return false;
    }
    let Some((leader, age)) = contact else {
        return false;
    };
    let window = timings.lease..timings.lease + timings.visit * 2;
    if leader == me || !window.contains(&age) || liveness.state(leader).is_alive() {
        return false;
    }
    let voters = || m.membership_config.membership().voter_ids();
    let name = queue.address().name();
    voters().any(|v| v == leader)
        && super::quiet::successor(name, voters(), leader, me, liveness) == Some(me)
}

/// What `queue`'s replica here needs by the rule above, and by the quiet
/// groups' (`quiet.rs`): a follower whose leader's node is alive, heard
/// in its current incarnation, goes without the tick though the leader
/// has stopped heartbeating; one whose leader is lost ticks again when
/// `quiet::may_elect` says so.
fn needs(queue: &QuorumQueue, me: NodeId, timings: &Timings, liveness: &PeerLiveness) -> Needs {
    let metrics = queue.raft.metrics();
    let m = metrics.borrow_watched();
    // The last AppendEntries taken here: from which leader, how long ago.
    let contact = queue.heard_contact();
    if lease_ran_out(queue, &m, contact, (me, timings, liveness)) {
        return Needs::Campaign;
    }
    let leader = match (m.state, m.current_leader) {
        (ServerState::Leader, Some(leader)) if leader == me => return Needs::Heartbeats,
        (ServerState::Follower, Some(leader)) if leader != me => leader,
        // A vote not yet committed here names the node that asked for it.
        (ServerState::Follower, None)
            if !m.vote.is_committed() && m.vote.leader_id().node_id != me =>
        {
            let candidate = m.vote.leader_id().node_id;
            // A replica stopped right after it handed its leadership away
            // wakes with the new leader's vote and no leader. It waits for
            // that leader as for one it knew (below), instead of
            // campaigning against it at its first election time-out. Only
            // a replica that has known no leader since it opened: a deposed
            // leader holds the vote of the candidate that deposed it, maybe
            // one whose log is too short to win, and must campaign itself.
            // And never one this replica refused for a shorter log: a
            // replica whose own campaign was refused takes the higher vote
            // the refusal named, maybe that of a candidate it had refused (a
            // 3-node group waited 12 s on such a candidate, both other
            // replicas holding its vote, in `quorum_lost_writes`).
            if queue.leader_changes() == 0 && !queue.candidate_behind(candidate) {
                candidate
            } else if queue.awaits_granted(
                candidate,
                m.vote.leader_id().term,
                liveness,
                timings.grant_wait,
            ) {
                // A vote this replica granted to a live candidate: it waits
                // for that candidate to lead rather than campaign
                // (`vote_guard.rs`).
                return Needs::Nothing { settled: false };
            } else {
                return Needs::Tick;
            }
        }
        _ => return Needs::Tick,
    };
    let voters = || m.membership_config.membership().voter_ids();
    if !voters().any(|v| v == leader) {
        // Removed from the group: openraft's timer decides.
        return Needs::Tick;
    }
    let heard = contact.filter(|(heard, _)| *heard == leader);
    let vouched = heard.is_some_and(|(_, age)| liveness.vouch(leader, age).is_some());
    // A leader whose node was found not running is known dead however
    // lately it was heard.
    let gone = liveness.is_gone(leader);
    let knows = !gone
        && match heard {
            Some((_, age)) => age < timings.fresh || vouched,
            // Not heard since this node started: the leader wakes its quiet
            // groups for this node's new incarnation; wait for it a while.
            None => liveness.awaited(leader, timings.election_min * STARTUP_WAIT_TIMEOUTS),
        };
    let name = queue.address().name();
    let elect = super::quiet::may_elect(name, voters(), leader, me, liveness, timings.election_min);
    if knows || !elect {
        Needs::Nothing { settled: vouched }
    } else if gone
        && m.vote.is_committed()
        && m.vote.leader_id().node_id == leader
        && super::quiet::successor(name, voters(), leader, me, liveness) == Some(me)
    {
        Needs::Succeed
    } else {
        Needs::Tick
    }
}

/// A candidate ticks (its election rounds are timed by it): called by the
/// leadership watcher on a change of state, so a follower that starts an
/// election without its tick (on a transfer of leadership to it) does not
/// wait for the driver. A new leader's heartbeats come from the driver.
pub(super) fn tick_if_candidate(raft: &QueueRaftHandle, state: ServerState) {
    if state == ServerState::Candidate {
        raft.runtime_config().tick(true);
    }
}

/// The slot of group `group` (a hash of the queue's name already).
fn slot_of(group: GroupId) -> usize {
    (group % SLOTS) as usize
}

/// Visit the replicas on the node's list (`visits.rs`) once a heartbeat
/// interval each, spread over [`SLOTS`] slots, until the node is dropped.
pub(super) fn spawn(node: Weak<QuorumNode>, config: &openraft::Config) {
    let period = Duration::from_millis((config.heartbeat_interval / SLOTS).max(1));
    let timings = Timings {
        fresh: fresh_window(config),
        election_min: Duration::from_millis(config.election_timeout_min),
        grant_wait: Duration::from_millis(config.election_timeout_max * GRANT_WAIT_TIMEOUTS),
        lease: Duration::from_millis(config.election_timeout_max),
        visit: Duration::from_millis(config.heartbeat_interval),
    };
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut slot = 0usize;
        // The listed groups by slot, and all of them.
        let mut round: Vec<Vec<GroupId>> = vec![Vec::new(); SLOTS as usize];
        let mut listed: HashSet<GroupId> = HashSet::new();
        let mut seen = Vec::new();
        loop {
            interval.tick().await;
            slot = (slot + 1) % SLOTS as usize;
            let Some(node) = node.upgrade() else {
                return;
            };
            // A peer lost, back or restarted: every replica decides again.
            let view = node.liveness.view();
            if view != seen {
                log_changes(&seen, &view);
                seen = view;
                for queue in node.queues() {
                    queue.shared.quiet.wake();
                }
            }
            for group in node.visits.take() {
                if listed.insert(group) {
                    round[slot_of(group)].push(group);
                }
            }
            let visit = Visit {
                node: &node,
                timings: &timings,
            };
            round[slot].retain(|group| {
                let keep = visit.visit(*group);
                if !keep {
                    listed.remove(group);
                }
                keep
            });
            node.visits.set_listed(listed.len());
        }
    });
}

/// Log each peer whose liveness flipped between two views: the moment
/// this node starts (or stops) electing in the groups a lost peer led.
fn log_changes(before: &[(NodeId, bool, Instant)], after: &[(NodeId, bool, Instant)]) {
    for (peer, alive, _) in after {
        let was = before
            .iter()
            .find(|(id, ..)| id == peer)
            .map(|(_, a, _)| *a);
        match (was, *alive) {
            (Some(true), false) => tracing::info!(peer, "peer node lost"),
            (Some(false), true) => tracing::info!(peer, "peer node alive again"),
            _ => {}
        }
    }
}

/// The driver's durations, from the Raft configuration.
struct Timings {
    /// [`fresh_window`].
    fresh: Duration,
    /// The shortest election time-out.
    election_min: Duration,
    /// How long after granting its vote a follower waits for the
    /// candidate to lead (`vote_guard.rs`).
    grant_wait: Duration,
    /// A leader's lease at its followers: `election_timeout_max`.
    lease: Duration,
    /// Between two visits of a listed replica: a heartbeat interval.
    visit: Duration,
}

/// One pass of the driver.
struct Visit<'a> {
    node: &'a QuorumNode,
    timings: &'a Timings,
}

impl Visit<'_> {
    /// Visit `group`'s replica here: whether it stays on the list.
    fn visit(&self, group: GroupId) -> bool {
        let cell = {
            let groups = self.node.groups.lock().unwrap_or_else(|p| p.into_inner());
            groups.get(&group).cloned()
        };
        let Some(cell) = cell else {
            return false; // closed
        };
        let Some(queue) = cell.get().cloned() else {
            return true; // still opening (it joined the list as it opened)
        };
        let quiet = &queue.shared.quiet;
        // Off the list before looking: a wake from now on lists it again.
        quiet.unlist();
        if self.node.start_up_held(group) {
            // No tick until the hold ends, which wakes it (`reopen.rs`).
            queue.raft.runtime_config().tick(false);
            return false;
        }
        let me = self.node.node_id();
        let needs = needs(&queue, me, self.timings, &self.node.liveness);
        let settled = match needs {
            Needs::Tick => {
                queue.raft.runtime_config().tick(true);
                false
            }
            Needs::Succeed => {
                queue.raft.runtime_config().tick(true);
                self.succeed(&queue, me);
                false
            }
            Needs::Campaign => {
                queue.raft.runtime_config().tick(true);
                // Never waits, as a heartbeat's trigger (a full command
                // channel: its election timer is running anyway).
                if let Some(Ok(())) = queue.raft.trigger().elect(true).now_or_never() {
                    self.node.successions.lease_out.fetch_add(1, Relaxed);
                }
                false
            }
            Needs::Nothing { settled } => {
                queue.raft.runtime_config().tick(false);
                settled
            }
            Needs::Heartbeats => {
                queue.raft.runtime_config().tick(false);
                let quiet_now = {
                    let metrics = queue.raft.metrics();
                    let m = metrics.borrow_watched();
                    quiet.leader_visit(&m, me)
                };
                if !quiet_now {
                    // Never waits: a group whose command channel is
                    // full (or that stopped) misses this beat rather
                    // than hold up every other group's.
                    let _ = queue.raft.trigger().heartbeat().now_or_never();
                } else if quiet.take_quiesce() {
                    // Once per quiet spell: the pass it costs the core
                    // changes the leader's metrics, which lists it again.
                    quiesce(&queue);
                }
                quiet_now
            }
        };
        if !settled {
            quiet.relist();
        }
        !settled
    }
}

/// A quiet leader is not visited again until something wakes it: its
/// replication streams and heartbeat workers go now (vendored openraft's
/// `Trigger::quiesce`; its next write or heartbeat makes them again), and
/// its proposer and settlement batcher if idle. Never waits, as a
/// heartbeat's trigger.
fn quiesce(queue: &QuorumQueue) {
    queue.park_idle_tasks();
    let _ = queue.raft.trigger().quiesce().now_or_never();
}

impl Visit<'_> {
    /// The group's leader's node is not running (nothing listens at its
    /// address: `PeerLiveness::is_gone`) and this replica is the group's
    /// successor: it takes over as if that leader had handed it the
    /// leadership. openraft's transfer starts an election at once, and the
    /// other voters grant its vote requests without waiting out the dead
    /// leader's lease. Otherwise a follower that heard its leader just
    /// before the crash campaigned only after that lease
    /// (`election_timeout_max`) and an election time-out: 5.9-6.7 s at
    /// 10,000 queues. Only for a node found not running: one merely
    /// silent may be alive and serving behind a partition until its own
    /// lease runs out, and only the lease keeps two leaders from serving
    /// at once. A voter with a longer log refuses, and the group elects
    /// the usual way.
    fn succeed(&self, queue: &QuorumQueue, me: NodeId) {
        let vote = queue.raft.metrics().borrow_watched().vote;
        let request = openraft::raft::TransferLeaderRequest::new(vote, me, None);
        let raft = queue.raft.clone();
        self.node.successions.gone.fetch_add(1, Relaxed);
        tokio::spawn(async move {
            // Ignored by openraft if the vote changed meanwhile.
            let _ = raft.handle_transfer_leader(request).await;
        });
    }
}

/// Elections a replica here started as its group's successor, counted.
#[derive(Debug, Default)]
pub(super) struct Successions {
    /// Take-overs from a leader whose node was found not running.
    gone: AtomicU64,
    /// Campaigns the moment a lost leader's lease ran out.
    lease_out: AtomicU64,
}

impl QuorumNode {
    /// How many times a replica here took over from a leader whose node
    /// was found not running (`Visit::succeed`) since the node started.
    pub fn successions(&self) -> u64 {
        self.successions.gone.load(Relaxed)
    }

    /// How many times a replica here campaigned the moment its lost
    /// leader's lease ran out (`lease_ran_out`) since the node started.
    pub fn lease_campaigns(&self) -> u64 {
        self.successions.lease_out.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(heartbeat_interval: u64, election_timeout_min: u64) -> openraft::Config {
        openraft::Config {
            heartbeat_interval,
            election_timeout_min,
            election_timeout_max: election_timeout_min * 2,
            ..openraft::Config::default()
        }
    }

    #[test]
    fn a_tick_back_on_comes_before_the_shortest_election_time_out() {
        for (hb, min) in [(500, 1500), (100, 300), (1000, 1500), (50, 1000)] {
            let config = config(hb, min);
            let visit = Duration::from_millis(hb);
            let tick = Duration::from_millis(tick_interval(&config));
            let worst = fresh_window(&config) + visit + tick;
            assert!(worst < Duration::from_millis(min), "{hb} {min}: {worst:?}");
        }
    }

    #[test]
    fn with_the_default_timings_an_idle_follower_goes_without_its_tick() {
        // The gap between two heartbeats (visits a heartbeat interval
        // apart, each up to a slot late) is within the window.
        let config = config(500, 1500);
        let gap = Duration::from_millis(500 + 500 / SLOTS);
        assert!(gap < fresh_window(&config), "{:?}", fresh_window(&config));
    }

    #[test]
    fn slots_spread_queues() {
        let mut counts = [0usize; SLOTS as usize];
        for i in 0..800 {
            counts[slot_of(crate::raft::group_id(&format!("q{i}")))] += 1;
        }
        assert!(counts.iter().all(|&c| c > 50), "{counts:?}");
    }
}
