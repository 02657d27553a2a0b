//! Node-level liveness: each node probes every peer over the fabric a few
//! times a second (one small call per peer, whatever the number of
//! groups), and knows of each whether it is alive, since when it runs as
//! its current incarnation (a boot id, new at every start), and since when
//! it is lost.
//!
//! Quiet groups (`quiet.rs`) rest on it: a follower whose leader's node is
//! alive, and who heard that leader in its current incarnation, needs no
//! heartbeat to know its leader lives; a leader whose voters' nodes are
//! all alive and all hold its last entry may stop heartbeating. A peer is
//! alive while it answered within [`PeerLiveness::down_after`] and its log
//! store works (a node that cannot write leads nothing). Hearing a probe
//! from a peer counts as hearing the peer. A peer whose probe fails while
//! nothing listens at its address (`NodeTransport::not_listening`: the
//! fabric's dial was refused) is lost at once: its process is not
//! running, and waiting out the down time-out only delayed its groups'
//! elections by that much. A slow or cut-off peer still gets the time-out.
//!
//! The probe (kind [`crate::net::kind::QUORUM_LIVENESS`]) carries the
//! asker's id and boot id; the answer the answerer's boot id and whether
//! its log store works, so both sides learn of a restart at once.
//!
//! The groups' replication streams ask it too (`raft::PeerReach`,
//! `lost_peer_wait.rs`): a stream to a peer known lost waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::node::QuorumNode;
use crate::net::{kind, CallFuture, Envelope, NodeId, TransportError};

/// How often each peer is probed.
const PROBE_EVERY: Duration = Duration::from_millis(250);

/// The time-out after which a silent peer counts as lost: the shortest
/// election time-out less a probe interval, so a lost leader's groups
/// elect within an election time-out or so of its death.
pub(super) fn down_after(config: &openraft::Config) -> Duration {
    let min = Duration::from_millis(config.election_timeout_min);
    min.saturating_sub(PROBE_EVERY).max(PROBE_EVERY * 2)
}

/// What this node knows of its peers.
#[derive(Debug)]
pub(crate) struct PeerLiveness {
    /// This incarnation's boot id (never 0).
    boot: u64,
    /// When this node started.
    started: Instant,
    /// A peer not heard from for this long is lost.
    down_after: Duration,
    peers: Mutex<HashMap<NodeId, Peer>>,
    /// The peers this node probes.
    probed: Mutex<std::collections::HashSet<NodeId>>,
    /// Counts the peers heard again after they were lost (or first heard,
    /// or serving again): streams waiting on a lost peer watch it.
    pub(super) revived: tokio::sync::watch::Sender<u64>,
    /// The waits of streams (and heartbeats) on a lost peer, counted,
    /// and whether the node's groups are shut down (`lost_peer_wait.rs`).
    pub(super) waits: Arc<super::lost_peer_wait::LostWaits>,
}

#[derive(Debug, Clone, Copy)]
struct Peer {
    boot: u64,
    /// Since when it runs as `boot` (as seen from here).
    up_since: Instant,
    last_heard: Instant,
    /// Its log store works.
    serving: bool,
    /// The incarnation before (`up_since`, last heard), if one was seen.
    before: Option<(Instant, Instant)>,
    /// Found not running (nothing listens at its address) at this moment,
    /// not heard since: lost without waiting out the down time-out.
    gone_at: Option<Instant>,
}

/// One peer as this node sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// Heard within the down time-out, its store working; its current
    /// incarnation seen since `up_since`, last heard `heard_ago` ago.
    Alive {
        up_since: Instant,
        heard_ago: Duration,
    },
    /// Not heard from (or not serving) since `lost_at`.
    Lost { lost_at: Instant },
}

impl PeerState {
    /// Whether the peer is alive.
    pub(crate) fn is_alive(self) -> bool {
        matches!(self, PeerState::Alive { .. })
    }
}

/// The probe (decoded from a peer's bytes: the `liveness_probe` fuzz
/// target covers it, `quorum/fuzz_checks.rs`).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Probe {
    pub(super) from: NodeId,
    pub(super) boot: u64,
}

/// Its answer.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ProbeAnswer {
    pub(super) boot: u64,
    pub(super) serving: bool,
}

impl PeerLiveness {
    /// Liveness for a node whose peers count as lost after `down_after`
    /// without an answer.
    pub(crate) fn new(down_after: Duration) -> PeerLiveness {
        let mut bytes = [0u8; 8];
        let boot = match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        };
        PeerLiveness {
            boot: boot | 1,
            started: Instant::now(),
            down_after,
            peers: Mutex::new(HashMap::new()),
            probed: Mutex::default(),
            revived: tokio::sync::watch::Sender::new(0),
            waits: Arc::default(),
        }
    }

    /// The time-out after which a silent peer is lost.
    pub(crate) fn down_after(&self) -> Duration {
        self.down_after
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Peer>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note that `peer` is probed from now on; whether it was not yet.
    fn probed(&self, peer: NodeId) -> bool {
        self.probed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(peer)
    }

    /// `peer` was heard from just now, as incarnation `boot`.
    pub(super) fn heard(&self, peer: NodeId, boot: u64, serving: bool) {
        let now = Instant::now();
        let mut peers = self.lock();
        let was_alive = peers
            .get(&peer)
            .is_some_and(|p| self.alive(p, now.saturating_duration_since(p.last_heard)));
        let entry = peers.entry(peer).or_insert(Peer {
            boot,
            up_since: now,
            last_heard: now,
            serving,
            before: None,
            gone_at: None,
        });
        if entry.boot != boot {
            tracing::info!(peer, "peer node restarted (new boot id)");
            entry.before = Some((entry.up_since, entry.last_heard));
            entry.boot = boot;
            entry.up_since = now;
        }
        entry.last_heard = now;
        entry.serving = serving;
        entry.gone_at = None;
        if serving && !was_alive {
            self.revived.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Whether `peer` was heard from since this node started and is lost
    /// now (one look at the table, where [`Self::state`] would not tell a
    /// peer never heard from one lost).
    pub(super) fn known_lost(&self, peer: NodeId) -> bool {
        let now = Instant::now();
        self.lock()
            .get(&peer)
            .is_some_and(|p| !self.alive(p, now.saturating_duration_since(p.last_heard)))
    }

    /// `peer`, heard from before, was found not running (its transport
    /// found nothing listening at its address `since` then): lost from
    /// now on, until it is heard again. A process killed on a host that
    /// still answers is lost here within a probe interval or two instead
    /// of the down time-out, and its groups elect that much sooner. Not if
    /// it was heard after `since`: a node restarted since (its probes
    /// reach this node before this node's redial reaches it).
    pub(super) fn gone(&self, peer: NodeId, since: Instant) {
        let now = Instant::now();
        let mut peers = self.lock();
        let Some(p) = peers.get_mut(&peer) else {
            return;
        };
        if p.gone_at.is_none()
            && p.last_heard < since
            && self.alive(p, now.saturating_duration_since(p.last_heard))
        {
            tracing::info!(
                peer,
                "nothing listens at the peer's address: its node is lost now"
            );
            p.gone_at = Some(now);
        }
    }

    /// Whether `peer` was found not running and not heard since
    /// ([`Self::gone`]).
    pub(crate) fn is_gone(&self, peer: NodeId) -> bool {
        self.lock().get(&peer).is_some_and(|p| p.gone_at.is_some())
    }

    /// Whether `p`, last heard `heard_ago` ago, counts as alive.
    fn alive(&self, p: &Peer, heard_ago: Duration) -> bool {
        p.serving && p.gone_at.is_none() && heard_ago < self.down_after
    }

    /// `peer` as this node sees it now.
    pub(crate) fn state(&self, peer: NodeId) -> PeerState {
        let now = Instant::now();
        match self.lock().get(&peer) {
            None => PeerState::Lost {
                lost_at: self.started,
            },
            Some(p) => {
                let heard_ago = now.saturating_duration_since(p.last_heard);
                if self.alive(p, heard_ago) {
                    PeerState::Alive {
                        up_since: p.up_since,
                        heard_ago,
                    }
                } else {
                    PeerState::Lost {
                        lost_at: p.gone_at.unwrap_or(p.last_heard + self.down_after).min(now),
                    }
                }
            }
        }
    }

    /// The last moment every one of `peers` was heard from as the
    /// incarnation it ran at `since` (that incarnation's last word if it
    /// has just restarted); `None` if one was not heard yet, restarted
    /// twice since or stopped serving.
    pub(super) fn heard_all_since(&self, peers: &[NodeId], since: Instant) -> Option<Instant> {
        let table = self.lock();
        let mut at = Instant::now();
        for peer in peers {
            let p = table.get(peer)?;
            let heard = if p.up_since <= since {
                p.serving.then_some(p.last_heard)?
            } else {
                match p.before {
                    Some((up_since, last_heard)) if up_since <= since => last_heard,
                    _ => return None,
                }
            };
            at = at.min(heard);
        }
        Some(at)
    }

    /// Each known peer, whether it is alive and since when it runs as its
    /// incarnation, in node order: the driver wakes every replica when
    /// this changes (`visits.rs`).
    pub(super) fn view(&self) -> Vec<(NodeId, bool, Instant)> {
        let now = Instant::now();
        let mut view: Vec<_> = self
            .lock()
            .iter()
            .map(|(id, p)| {
                let alive = self.alive(p, now.saturating_duration_since(p.last_heard));
                (*id, alive, p.up_since)
            })
            .collect();
        view.sort_unstable_by_key(|(id, ..)| *id);
        view
    }

    /// Whether every one of `peers` was heard from since this node started.
    fn heard_from_all(&self, peers: &[NodeId]) -> bool {
        let table = self.lock();
        peers.iter().all(|p| table.contains_key(p))
    }

    /// Whether `leader`'s node is alive and this node started less than
    /// `grace` ago: a replica that has not heard from it since the start
    /// waits for it (it woke the groups it leads quietly when it saw this
    /// node restart) rather than elect against a leader that merely
    /// sleeps. (This node sees every peer's incarnation first after its
    /// own start, so whether the leader ran before cannot be asked; this
    /// asked it, was never true, and a restarted node with 10,000 groups
    /// campaigned in thousands of them before their leaders reached it.)
    pub(crate) fn awaited(&self, leader: NodeId, grace: Duration) -> bool {
        self.state(leader).is_alive() && self.started.elapsed() < grace
    }

    /// Whether the vote guard (`vote_guard.rs`) may refuse a candidate
    /// for `leader`: vouched for as below and heard within two probe
    /// intervals (the down time-out if that is shorter). A candidate that
    /// campaigns because its node lost the leader has not heard it for
    /// the down time-out; a survivor that has not noticed the loss yet
    /// last heard it about as long ago, and refusing then cost the group
    /// an election time-out (83 and 14 refusals in two of three quiet
    /// kills at 1,000 queues, both slow runs). A live leader is heard
    /// every probe interval.
    pub(crate) fn vouch_fresh(&self, leader: NodeId, contact_age: Duration) -> bool {
        let fresh = (PROBE_EVERY * 2).min(self.down_after);
        self.vouch(leader, contact_age)
            .is_some_and(|heard_ago| heard_ago < fresh)
    }

    /// How long ago `leader` was last heard, if its node is alive and a
    /// contact with it `contact_age` ago came from its current
    /// incarnation: then a follower knows its leader lives without its
    /// heartbeats.
    pub(crate) fn vouch(&self, leader: NodeId, contact_age: Duration) -> Option<Duration> {
        match self.state(leader) {
            PeerState::Alive {
                up_since,
                heard_ago,
            } => {
                let contact_at = Instant::now().checked_sub(contact_age)?;
                (contact_at >= up_since).then_some(heard_ago)
            }
            PeerState::Lost { .. } => None,
        }
    }
}

impl QuorumNode {
    /// Start probing the peers (one task per peer, each ending with the
    /// node), and hold the elections of the groups opened from disk (each
    /// opened with them off) until every peer had a chance to wake the
    /// quiet groups it leads.
    pub(super) fn start_liveness(self: &Arc<Self>, held: Vec<Arc<super::queue::QuorumQueue>>) {
        let peers: Vec<NodeId> = self
            .config
            .cluster_members()
            .into_iter()
            .filter(|p| *p != self.node_id)
            .collect();
        for &peer in &peers {
            if self.liveness.probed(peer) {
                tokio::spawn(probe_loop(Arc::downgrade(self), peer));
            }
        }
        if peers.is_empty() {
            // Alone: nobody leads anything quietly elsewhere.
            self.release_held(&held);
            return;
        }
        if held.is_empty() {
            return;
        }
        // Opened with elections off (`QuorumNode::open`).
        let node = Arc::downgrade(self);
        let settle = Duration::from_millis(self.raft_config.heartbeat_interval * 2);
        tokio::spawn(async move {
            let started = Instant::now();
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let Some(node) = node.upgrade() else { return };
                let waited = started.elapsed();
                // A peer that knows this incarnation wakes the groups it
                // leads with this node as a voter at its next visit of
                // them (`follower_tick.rs`); one silent for the down
                // time-out is down.
                if waited >= STARTUP_HOLD_MAX
                    || waited >= node.liveness.down_after()
                    || node.liveness.heard_from_all(&peers)
                {
                    break;
                }
            }
            tokio::time::sleep(settle).await;
            tracing::info!(
                after_ms = started.elapsed().as_millis() as u64,
                groups = held.len(),
                "start-up hold over: groups opened from disk may elect"
            );
            if let Some(node) = node.upgrade() {
                node.release_held(&held);
            }
        });
    }

    /// Answer a peer's liveness probe.
    pub fn handle_liveness(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        let answer = match postcard::from_bytes::<Probe>(&envelope.payload) {
            Ok(probe) if probe.from == from => {
                self.liveness.heard(from, probe.boot, true);
                if self.liveness.probed(from) {
                    // A node this one was not configured with (added to
                    // the cluster since): probe it too.
                    tokio::spawn(probe_loop(Arc::downgrade(&self), from));
                }
                let answer = ProbeAnswer {
                    boot: self.liveness.boot,
                    serving: self.log_store().failure().is_none(),
                };
                postcard::to_allocvec(&answer)
                    .map(Bytes::from)
                    .map_err(|e| e.to_string())
            }
            Ok(_) => Err("liveness probe: sender does not match".to_string()),
            Err(e) => Err(format!("liveness probe: {e}")),
        };
        let node = self.node_id;
        Box::pin(async move { answer.map_err(|message| TransportError::Remote { node, message }) })
    }
}

/// The longest groups opened from disk hold their elections.
const STARTUP_HOLD_MAX: Duration = Duration::from_secs(6);

/// Probe `peer` every [`PROBE_EVERY`] until the node goes.
async fn probe_loop(node: Weak<QuorumNode>, peer: NodeId) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some(node) = node.upgrade() else { return };
        let probe = Probe {
            from: node.node_id,
            boot: node.liveness.boot,
        };
        let Ok(payload) = postcard::to_allocvec(&probe) else {
            return;
        };
        let envelope = Envelope {
            channel: 0,
            kind: kind::QUORUM_LIVENESS,
            meta: Bytes::new(),
            payload: Bytes::from(payload),
        };
        let call = node.transport.call(node.node_id, peer, envelope);
        let within = node.liveness.down_after();
        let liveness = node.liveness.clone();
        let (me, transport) = (node.node_id, node.transport.clone());
        let fast_loss = node.config.lost_when_not_listening;
        // Not holding the node while waiting for the answer.
        drop(node);
        match tokio::time::timeout(within, call).await {
            Ok(Ok(reply)) => {
                if let Ok(answer) = postcard::from_bytes::<ProbeAnswer>(&reply) {
                    liveness.heard(peer, answer.boot, answer.serving);
                }
            }
            _ if fast_loss => {
                if let Some(since) = transport.not_listening_since(me, peer) {
                    liveness.gone(peer, since);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_peer_is_alive_while_heard_and_lost_after_the_time_out() {
        let live = PeerLiveness::new(Duration::from_millis(1000));
        assert!(matches!(live.state(2), PeerState::Lost { .. }));
        live.heard(2, 7, true);
        assert!(live.state(2).is_alive());
        tokio::time::advance(Duration::from_millis(600)).await;
        assert!(live.state(2).is_alive());
        // A contact 500 ms ago came from this incarnation.
        assert!(live.vouch(2, Duration::from_millis(500)).is_some());
        // One 700 ms ago came before it was first heard as boot 7.
        assert_eq!(live.vouch(2, Duration::from_millis(700)), None);
        tokio::time::advance(Duration::from_millis(500)).await;
        let heard = Instant::now() - Duration::from_millis(1100);
        assert_eq!(
            live.state(2),
            PeerState::Lost {
                lost_at: heard + Duration::from_millis(1000)
            }
        );
        assert_eq!(live.vouch(2, Duration::ZERO), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_vote_guard_vouches_only_for_a_leader_heard_lately() {
        let live = PeerLiveness::new(Duration::from_millis(1250));
        live.heard(2, 7, true);
        tokio::time::advance(Duration::from_millis(400)).await;
        assert!(live.vouch_fresh(2, Duration::ZERO));
        // Alive, but silent for two probe intervals: a peer that lost it
        // may be right, the guard no longer refuses for it.
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(live.state(2).is_alive());
        assert!(!live.vouch_fresh(2, Duration::ZERO));
        live.heard(2, 7, true);
        assert!(live.vouch_fresh(2, Duration::ZERO));
        // A contact from before this incarnation is vouched for by none.
        live.heard(2, 8, true);
        assert!(!live.vouch_fresh(2, Duration::from_millis(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_leader_is_awaited_for_a_while_after_this_nodes_start() {
        let live = PeerLiveness::new(Duration::from_millis(1000));
        let grace = Duration::from_secs(30);
        // Not heard yet: nothing to wait for.
        assert!(!live.awaited(2, grace));
        tokio::time::advance(Duration::from_millis(300)).await;
        live.heard(2, 7, true);
        assert!(live.awaited(2, grace));
        tokio::time::advance(Duration::from_secs(29)).await;
        live.heard(2, 7, true);
        assert!(live.awaited(2, grace));
        tokio::time::advance(Duration::from_secs(1)).await;
        live.heard(2, 7, true);
        assert!(!live.awaited(2, grace), "the grace counts from the start");
        // A lost leader is not waited for.
        let live = PeerLiveness::new(Duration::from_millis(1000));
        live.heard(2, 7, true);
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert!(!live.awaited(2, grace));
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_or_a_failed_store_ends_the_vouching() {
        let live = PeerLiveness::new(Duration::from_millis(1000));
        live.heard(3, 7, true);
        tokio::time::advance(Duration::from_millis(100)).await;
        live.heard(3, 9, true);
        // Heard 50 ms ago: before the restart (100 ms ago no, 0 ms yes).
        assert_eq!(live.vouch(3, Duration::from_millis(50)), None);
        assert!(live.vouch(3, Duration::ZERO).is_some());
        live.heard(3, 9, false);
        assert!(!live.state(3).is_alive());
        assert!(live.heard_from_all(&[3]));
        assert!(!live.heard_from_all(&[3, 4]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_leader_is_vouched_for_until_the_last_word_of_the_incarnation_that_acked() {
        let live = PeerLiveness::new(Duration::from_millis(1000));
        live.heard(2, 7, true);
        live.heard(3, 5, true);
        let quiet_at = Instant::now();
        tokio::time::advance(Duration::from_millis(300)).await;
        live.heard(2, 7, true);
        let last_of_7 = Instant::now();
        // The oldest of the voters' last words.
        assert_eq!(live.heard_all_since(&[2, 3], quiet_at), Some(quiet_at));
        assert_eq!(live.heard_all_since(&[2], quiet_at), Some(last_of_7));
        // Node 2 restarted: its old incarnation's last word still counts.
        tokio::time::advance(Duration::from_millis(200)).await;
        live.heard(2, 8, true);
        assert_eq!(live.heard_all_since(&[2], quiet_at), Some(last_of_7));
        // Twice: the incarnation before is not the one that acked.
        tokio::time::advance(Duration::from_millis(200)).await;
        live.heard(2, 9, true);
        assert_eq!(live.heard_all_since(&[2], quiet_at), None);
        // Never heard, or its store failed: no vouching.
        assert_eq!(live.heard_all_since(&[4], quiet_at), None);
        live.heard(3, 5, false);
        assert_eq!(live.heard_all_since(&[3], quiet_at), None);
        assert!(live.heard_all_since(&[], quiet_at).is_some());
    }
}
