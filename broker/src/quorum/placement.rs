//! Where quorum queues live. With the cluster's replica sets attached
//! ([`QuorumNode::attach_replica_sets`]) a queue's replica set is the one the
//! metadata group recorded when it was declared (first member = preferred
//! leader); before that (a `QuorumNode` on its own, unit tests) the
//! deterministic ring placement of `node::replicas_of` applies.
//!
//! - Creating: only the preferred leader initializes a new group (and so
//!   wins its first election), which spreads leaders as the metadata
//!   spread preferred leaders. Any other member asks it to (a `Locate`
//!   with `create`), and initializes itself only if it cannot be reached.
//! - Following: every node watches `Metadata::changes` and opens the
//!   groups it is a member of, so replicas exist before the first publish;
//!   the leader of a group whose member list changed applies it to the
//!   Raft membership (learners first, then the voter set), retried every
//!   second until the voters match; a node no longer a member stops its
//!   replica once the group no longer counts it.

use openraft::async_runtime::watch::WatchReceiver;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use super::cluster_view::{PeerRequests, ReplicaSet, ReplicaSets};
use super::node::{initialize, QuorumError, QuorumNode};
use super::queue::QuorumQueue;
use crate::config::QuorumConfig;
use crate::net::NodeId;
use crate::queue::{Queue, QueueAddress};
use crate::raft::{group_id, GroupId};

/// How often the metadata follower re-checks the groups not settled yet
/// (retries of membership changes that failed or timed out).
const TICK: Duration = Duration::from_secs(1);
/// How often it looks at every group all the same.
const FULL_PASS_EVERY: Duration = Duration::from_secs(60);
/// Bound of one membership step (adding a learner until it caught up, or
/// changing the voters).
const MEMBERSHIP_STEP: Duration = Duration::from_secs(10);
/// How long a replica the metadata dropped keeps running while its group
/// still counts it as a voter (it may be needed for the quorum of the
/// joint configuration until the change commits).
const RETIRE_GRACE: Duration = Duration::from_secs(30);

impl QuorumNode {
    /// Place queues by the cluster's record of replica sets from now on,
    /// and follow its changes (open groups of which this node became a
    /// member, apply member changes of groups it leads, stop replicas it
    /// lost).
    pub fn attach_replica_sets(self: &Arc<Self>, sets: Arc<dyn ReplicaSets>) {
        if self.replica_sets.set(sets.clone()).is_ok() {
            let every = Duration::from_millis(self.config.leader_rebalance_interval_ms);
            super::rebalance::spawn(Arc::downgrade(self), sets.clone(), every);
            tokio::spawn(follow_replica_sets(Arc::downgrade(self), sets));
        }
    }

    /// Send requests to other nodes (creation by the preferred leader,
    /// campaigns in a hand-off) through `peers`.
    pub fn attach_peer_requests(&self, peers: Arc<dyn PeerRequests>) {
        let _ = self.peers.set(peers);
    }

    /// The nodes that hold a replica of `name`, preferred leader first: as
    /// the metadata recorded it, else (not attached, or not declared yet)
    /// the deterministic placement.
    pub fn replicas(&self, name: &str) -> Vec<NodeId> {
        self.replica_sets
            .get()
            .and_then(|sets| sets.replica_set(name))
            .map(|set| set.members)
            .unwrap_or_else(|| replicas_of(&self.config, group_id(name)))
    }

    /// Whether the cluster metadata records the queue `name`.
    pub fn is_declared(&self, name: &str) -> bool {
        self.replica_sets
            .get()
            .is_some_and(|sets| sets.replica_set(name).is_some())
    }

    /// Declare `name` (idempotent) and return its replicas, preferred
    /// leader first.
    pub async fn place(&self, name: &str) -> Result<Vec<NodeId>, QuorumError> {
        match self.replica_sets.get() {
            Some(sets) => Ok(sets
                .declare(name)
                .await
                .map_err(QuorumError::Placement)?
                .members),
            None => Ok(replicas_of(&self.config, group_id(name))),
        }
    }

    /// Declare and open (creating if new) the group of `name` on this node,
    /// a replica, and wait (bounded by `leader_wait_ms`) until it has a
    /// leader. The preferred leader initializes a new group; another
    /// member asks it to, and initializes the same members itself only if
    /// it cannot (openraft accepts identical initializations).
    pub async fn ensure(&self, name: &str) -> Result<Arc<QuorumQueue>, QuorumError> {
        let wait = Duration::from_millis(self.config.leader_wait_ms);
        let deadline = Instant::now() + wait;
        let members = self.place(name).await?;
        let address = format!("/quorum/{name}");
        if !members.contains(&self.node_id) {
            return Err(QuorumError::NotReplica(address, self.node_id));
        }
        let preferred = members.first() == Some(&self.node_id) || self.replica_sets.get().is_none();
        let queue = self
            .ensure_open(name, preferred.then_some(members.as_slice()))
            .await?;
        if preferred {
            // The metadata follower may have opened it (uninitialized)
            // between the declaration and here.
            initialize(&queue.raft, queue.address(), &members).await?;
        } else if queue.leader().is_none() {
            let asked = match self.peers.get() {
                Some(peers) => {
                    peers
                        .ask_to_create(members[0], address.clone(), wait / 2)
                        .await
                }
                None => Err("no route to other nodes".to_owned()),
            };
            if let Err(error) = asked {
                if queue.leader().is_none() {
                    tracing::info!(queue = %address, preferred = members[0], %error,
                        "preferred leader cannot create the queue; creating it here");
                    initialize(&queue.raft, queue.address(), &members).await?;
                }
            }
        }
        queue
            .raft
            .wait(Some(deadline.saturating_duration_since(Instant::now())))
            .metrics(|m| m.current_leader.is_some(), "leader elected")
            .await
            .map_err(|_| QuorumError::NoLeader(address, wait))?;
        Ok(queue)
    }

    /// Bring one group in line with its replica set: whether it is
    /// settled (a member's replica open with the recorded voters, or no
    /// replica here of a group this node is not a member of); an
    /// unsettled one is looked at again at the next tick.
    async fn reconcile(&self, info: &ReplicaSet) -> bool {
        let me = self.node_id;
        let Ok(address) = QueueAddress::parse(&format!("/quorum/{}", info.name)) else {
            return true;
        };
        let member = info.members.contains(&me);
        match self.get(&address) {
            None if member => {
                // Opened without initializing: its leader reaches it.
                if let Err(error) = self.ensure_open(&info.name, None).await {
                    tracing::warn!(queue = %address, %error, "cannot open replica");
                }
                false
            }
            None => true,
            Some(queue) if leads(&queue, me) => {
                self.apply_members(&queue, info).await;
                voters_are(&queue, &info.members)
            }
            Some(queue) if !member => {
                self.retire(&queue).await;
                false
            }
            Some(queue) => {
                self.lock_retiring().remove(&info.group);
                voters_are(&queue, &info.members)
            }
        }
    }

    /// On the group's leader: make the Raft voters equal the metadata's
    /// members. A leader that is itself dropped hands the leadership to a
    /// remaining member first; that one then applies the change.
    async fn apply_members(&self, queue: &Arc<QuorumQueue>, info: &ReplicaSet) {
        let desired: BTreeSet<NodeId> = info.members.iter().copied().collect();
        let voters: BTreeSet<NodeId> = {
            let metrics = queue.metrics();
            let m = metrics.borrow_watched();
            m.membership_config.membership().voter_ids().collect()
        };
        if desired.is_empty() || desired == voters {
            return;
        }
        let address = queue.address().to_string();
        if !desired.contains(&self.node_id) {
            let Some(to) = info.members.iter().find(|n| voters.contains(n)) else {
                tracing::warn!(queue = %address, ?desired, ?voters,
                    "no member of the new replica set is a voter yet; not changing");
                return;
            };
            match self.hand_off(queue, Some(*to), false).await {
                Ok(done) => tracing::info!(queue = %address, %done, "leader left the replica set"),
                Err(error) => tracing::warn!(queue = %address, %error, "hand-off failed"),
            }
            return;
        }
        tracing::info!(queue = %address, ?voters, ?desired, "changing replica set");
        for new in desired.difference(&voters) {
            // Blocking: returns once the learner has caught up, so making
            // it a voter does not stall commits.
            let added = tokio::time::timeout(
                MEMBERSHIP_STEP,
                queue.raft.add_learner(*new, super::types::member(), true),
            )
            .await;
            match added {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(queue = %address, node = new, %error, "add learner");
                    return;
                }
                Err(_) => {
                    tracing::warn!(queue = %address, node = new, "learner not caught up in time; retrying later");
                    return;
                }
            }
        }
        match tokio::time::timeout(
            MEMBERSHIP_STEP,
            queue.raft.change_membership(desired.clone(), false),
        )
        .await
        {
            Ok(Ok(_)) => tracing::info!(queue = %address, ?desired, "replica set changed"),
            Ok(Err(error)) => tracing::warn!(queue = %address, %error, "change membership"),
            Err(_) => tracing::warn!(queue = %address, "membership change not committed in time"),
        }
    }

    /// Stop this node's replica of a queue the metadata no longer places
    /// here: once its group no longer counts this node as a voter, or
    /// after a grace period (a removed node may never hear the final
    /// configuration). Its directory stays (see docs/architecture.md).
    async fn retire(&self, queue: &Arc<QuorumQueue>) {
        let group = group_id(queue.address().name());
        let still_voter = {
            let metrics = queue.metrics();
            let m = metrics.borrow_watched();
            let voter = m
                .membership_config
                .membership()
                .voter_ids()
                .any(|id| id == self.node_id);
            voter
        };
        let since = *self
            .lock_retiring()
            .entry(group)
            .or_insert_with(Instant::now);
        if still_voter && since.elapsed() < RETIRE_GRACE {
            return;
        }
        tracing::info!(queue = %queue.address(), "no longer a replica here; stopping it");
        self.forget(group);
        if let Err(error) = queue.raft.shutdown().await {
            tracing::warn!(queue = %queue.address(), %error, "raft shutdown");
        }
        self.lock_retiring().remove(&group);
    }

    fn lock_retiring(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<GroupId, Instant>> {
        self.retiring.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether this node leads the queue's group now.
pub(super) fn leads(queue: &QuorumQueue, me: NodeId) -> bool {
    let metrics = queue.metrics();
    let m = metrics.borrow_watched();
    m.state == ServerState::Leader && m.current_leader == Some(me)
}

/// The node's replica-set follower, until the node stops or goes away:
/// at each change of the record, the groups whose record changed; at each
/// tick, the groups not settled yet (`QuorumNode::reconcile`); every
/// [`FULL_PASS_EVERY`], all of them. It looked at every group every
/// second: at 10,000 queues a quarter of an idle node's CPU, and during
/// creation a pass over every group per declaration.
async fn follow_replica_sets(node: Weak<QuorumNode>, sets: Arc<dyn ReplicaSets>) {
    let mut changes = sets.changes();
    let mut known: HashMap<GroupId, ReplicaSet> = HashMap::new();
    let mut unsettled: HashSet<GroupId> = HashSet::new();
    let mut changed = true;
    let mut full_pass_at = Instant::now() + FULL_PASS_EVERY;
    loop {
        {
            let Some(node) = node.upgrade() else { return };
            if node.stopping.load(Ordering::Acquire) {
                return;
            }
            if changed {
                changes.borrow_and_update();
                let all = sets.all();
                node.wipe_deleted(&all).await;
                let mut now_known = HashMap::with_capacity(all.len());
                for info in all {
                    if known.get(&info.group) != Some(&info) {
                        unsettled.insert(info.group);
                    }
                    now_known.insert(info.group, info);
                }
                known = now_known;
            }
            if Instant::now() >= full_pass_at {
                full_pass_at = Instant::now() + FULL_PASS_EVERY;
                unsettled.extend(known.keys().copied());
            }
            let mut still = HashSet::new();
            for group in unsettled.drain() {
                let Some(info) = known.get(&group) else {
                    continue;
                };
                if !node.reconcile(info).await {
                    still.insert(group);
                }
            }
            unsettled = still;
        }
        changed = tokio::select! {
            result = changes.changed() => {
                if result.is_err() {
                    return;
                }
                true
            }
            _ = tokio::time::sleep(TICK) => false,
        };
    }
}

/// Whether the group's Raft voters are `members`.
fn voters_are(queue: &QuorumQueue, members: &[NodeId]) -> bool {
    let metrics = queue.metrics();
    let m = metrics.borrow_watched();
    let voters: BTreeSet<NodeId> = m.membership_config.membership().voter_ids().collect();
    voters.len() == members.len() && members.iter().all(|n| voters.contains(n))
}

/// The members of a group without cluster metadata (a `QuorumNode` used
/// on its own, or before `attach_metadata`): `replication_factor` nodes of
/// the cluster in ring order from a place chosen by the group id. With
/// metadata attached, `placement.rs` asks the metadata instead.
pub(crate) fn replicas_of(config: &QuorumConfig, group: GroupId) -> Vec<NodeId> {
    let all = config.cluster_members();
    let start = (group % all.len() as u64) as usize;
    let n = config.replication_factor.clamp(1, all.len());
    (0..n).map(|i| all[(start + i) % all.len()]).collect()
}
