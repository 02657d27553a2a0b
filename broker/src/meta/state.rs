//! The replicated cluster metadata ([`ClusterState`]): the cluster's
//! members, every quorum queue with its replica set, and a version. Pure:
//! applying the same [`MetaCommand`]s in the same order gives the same
//! state on every node, which is why queue placement is decided here, in
//! `apply`, and not by whoever proposed the declaration.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::placement_index::{Load, PlacementIndex};
use crate::net::NodeId;
use crate::raft::{group_id, GroupId};

/// Where a node of the cluster can be reached.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Its fabric (inter-node RPC) address, `host:port`.
    pub fabric: String,
    /// Its AMQP listener, `host:port`, once known.
    pub amqp: Option<String>,
}

/// A quorum queue as the cluster knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// The queue's name (the part after `/quorum/`).
    pub name: String,
    /// Its Raft group id (`raft::group_id(name)`).
    pub group: GroupId,
    /// The nodes holding a replica; the first is the preferred leader.
    pub members: Vec<NodeId>,
}

impl QueueInfo {
    /// The node that should lead the queue's group when it is up.
    pub fn preferred_leader(&self) -> Option<NodeId> {
        self.members.first().copied()
    }
}

/// A change to the cluster metadata (an entry of the metadata group's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// Record a node as a member (or update where it is).
    AddNode {
        /// The node.
        id: NodeId,
        /// Where it is.
        info: NodeInfo,
    },
    /// Forget a node; every queue that had a replica on it gets another
    /// member instead (when the cluster has one to spare).
    RemoveNode {
        /// The node.
        id: NodeId,
    },
    /// Create a queue if it does not exist, placing its replicas.
    DeclareQueue {
        /// The queue's name.
        name: String,
        /// Replicas wanted, capped by the number of members. Carried in
        /// the command (from the proposer's config) so every replica
        /// places the queue identically even if their configs differ.
        replication_factor: u32,
    },
    /// Delete a queue.
    DeleteQueue {
        /// The queue's name.
        name: String,
    },
    /// Replace a queue's replica set (first = preferred leader): to move
    /// its leadership for maintenance or to rebalance.
    SetQueueMembers {
        /// The queue's name.
        name: String,
        /// The new members, each a member of the cluster, no duplicates.
        members: Vec<NodeId>,
    },
}

/// openraft 0.10 logs an entry's data with `Display`.
impl std::fmt::Display for MetaCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaCommand::AddNode { id, info } => write!(f, "add-node({id}, {})", info.fabric),
            MetaCommand::RemoveNode { id } => write!(f, "remove-node({id})"),
            MetaCommand::DeclareQueue { name, .. } => write!(f, "declare({name})"),
            MetaCommand::DeleteQueue { name } => write!(f, "delete({name})"),
            MetaCommand::SetQueueMembers { name, members } => {
                write!(f, "set-members({name}, {members:?})")
            }
        }
    }
}

/// What applying a command answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaResponse {
    /// Applied (or nothing to do).
    #[default]
    Done,
    /// The queue as it now is (declare, set members).
    Queue(QueueInfo),
    /// The queue or node did not exist.
    NotFound,
    /// The command was refused; the state did not change.
    Rejected(String),
}

/// The cluster metadata every node of the metadata group holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// The cluster's members.
    pub members: BTreeMap<NodeId, NodeInfo>,
    /// Every quorum queue, by name.
    pub queues: BTreeMap<String, QueueInfo>,
    /// Bumped by every change.
    pub version: u64,
    /// Placement's counts (derived from `queues`; not serialised, never
    /// compared), so a declaration costs the same at any queue count.
    #[serde(skip)]
    placement: PlacementIndex,
}

impl ClusterState {
    /// Seed the member list from the group's first membership (the nodes
    /// that bootstrapped the cluster), so queues can be placed before any
    /// `AddNode`. Only while the list is empty: later membership changes
    /// are recorded by explicit commands, so a joint configuration that
    /// still lists a node being removed does not bring it back.
    pub fn seed_members<'a>(&mut self, nodes: impl IntoIterator<Item = (NodeId, &'a str)>) {
        if !self.members.is_empty() {
            return;
        }
        for (id, fabric) in nodes {
            self.members.insert(
                id,
                NodeInfo {
                    fabric: fabric.to_owned(),
                    amqp: None,
                },
            );
        }
        if !self.members.is_empty() {
            self.version += 1;
        }
    }

    /// Apply one command; the version moves only if the state changed.
    pub fn apply(&mut self, command: MetaCommand) -> MetaResponse {
        let before = self.version;
        let response = match command {
            MetaCommand::AddNode { id, info } => {
                if self.members.get(&id) != Some(&info) {
                    self.members.insert(id, info);
                    self.version += 1;
                }
                MetaResponse::Done
            }
            MetaCommand::RemoveNode { id } => self.remove_node(id),
            MetaCommand::DeclareQueue {
                name,
                replication_factor,
            } => self.declare(name, replication_factor as usize),
            MetaCommand::DeleteQueue { name } => match self.queues.remove(&name) {
                Some(_) => {
                    self.version += 1;
                    MetaResponse::Done
                }
                None => MetaResponse::NotFound,
            },
            MetaCommand::SetQueueMembers { name, members } => self.set_members(&name, members),
        };
        debug_assert!(self.version >= before);
        response
    }

    /// Every member's load, counted by walking every queue.
    fn count_loads(&self) -> BTreeMap<NodeId, Load> {
        let mut loads: BTreeMap<NodeId, Load> = self
            .members
            .keys()
            .map(|id| (*id, Load::default()))
            .collect();
        for queue in self.queues.values() {
            Self::shift_loads(&mut loads, queue, true);
        }
        loads
    }

    /// Count `queue` in (`add`) or out of the members' `loads`.
    fn shift_loads(loads: &mut BTreeMap<NodeId, Load>, queue: &QueueInfo, add: bool) {
        for (position, id) in queue.members.iter().enumerate() {
            if let Some(load) = loads.get_mut(id) {
                load.shift(position == 0, add);
            }
        }
    }

    /// Every member's load, from the placement index (brought up to date
    /// first if a change other than a declaration moved the version).
    fn indexed_loads(&mut self) -> BTreeMap<NodeId, Load> {
        if !self.placement.is_at(self.version) {
            self.placement.rebuild(self.queues.values(), self.version);
        }
        self.members
            .keys()
            .map(|id| (*id, self.placement.load(*id)))
            .collect()
    }

    /// The `n` least loaded members not in `exclude`: fewest replicas,
    /// then fewest preferred leaderships, then lowest id.
    fn least_loaded_replicas(
        loads: &BTreeMap<NodeId, Load>,
        exclude: &BTreeSet<NodeId>,
        n: usize,
    ) -> Vec<NodeId> {
        let mut candidates: Vec<(usize, usize, NodeId)> = loads
            .iter()
            .filter(|(id, _)| !exclude.contains(id))
            .map(|(id, load)| (load.replicas, load.leaders, *id))
            .collect();
        candidates.sort_unstable();
        candidates
            .into_iter()
            .take(n)
            .map(|(_, _, id)| id)
            .collect()
    }

    fn declare(&mut self, name: String, replication_factor: usize) -> MetaResponse {
        if let Some(existing) = self.queues.get(&name) {
            return MetaResponse::Queue(existing.clone());
        }
        if name.is_empty() {
            return MetaResponse::Rejected("empty queue name".into());
        }
        let group = group_id(&name);
        let loads = self.indexed_loads();
        if let Some(other) = self.placement.holder_of(group) {
            return MetaResponse::Rejected(format!(
                "queue {name} collides with {other} (same group id)"
            ));
        }
        // The preferred leader first: the node with the fewest preferred
        // leaderships (then fewest replicas, then lowest id), so leaders
        // spread evenly (within one); then the other replicas on the
        // nodes with the fewest replicas (then leaderships, then id).
        // Both cannot always be within one at once; leaders are what the
        // load follows, so they win (replicas stay within two).
        let Some(leader) = loads
            .iter()
            .min_by_key(|(id, load)| (load.leaders, load.replicas, **id))
            .map(|(id, _)| *id)
        else {
            return MetaResponse::Rejected("the cluster has no members".into());
        };
        let n = replication_factor.clamp(1, loads.len());
        let mut members = vec![leader];
        members.extend(Self::least_loaded_replicas(
            &loads,
            &BTreeSet::from([leader]),
            n - 1,
        ));
        let info = QueueInfo {
            name: name.clone(),
            group,
            members,
        };
        self.version += 1;
        self.placement.add(&info, self.version);
        self.queues.insert(name, info.clone());
        MetaResponse::Queue(info)
    }

    fn set_members(&mut self, name: &str, members: Vec<NodeId>) -> MetaResponse {
        if members.is_empty() {
            return MetaResponse::Rejected(format!("queue {name}: empty member list"));
        }
        let unique: BTreeSet<NodeId> = members.iter().copied().collect();
        if unique.len() != members.len() {
            return MetaResponse::Rejected(format!("queue {name}: duplicate members"));
        }
        if let Some(stranger) = members.iter().find(|id| !self.members.contains_key(id)) {
            return MetaResponse::Rejected(format!(
                "queue {name}: node {stranger} is not a cluster member"
            ));
        }
        let Some(queue) = self.queues.get_mut(name) else {
            return MetaResponse::NotFound;
        };
        if queue.members != members {
            queue.members = members;
            self.version += 1;
        }
        MetaResponse::Queue(queue.clone())
    }

    fn remove_node(&mut self, id: NodeId) -> MetaResponse {
        if !self.members.contains_key(&id) {
            return MetaResponse::NotFound;
        }
        if self.members.len() == 1 {
            return MetaResponse::Rejected(format!("node {id} is the last member"));
        }
        self.members.remove(&id);
        // Queues in name order, each replacement chosen with the loads as
        // they are after the previous one, so replacements spread too.
        let mut loads = self.count_loads();
        for queue in self.queues.values_mut() {
            if !queue.members.contains(&id) {
                continue;
            }
            Self::shift_loads(&mut loads, queue, false);
            // The removed node's place goes to the next member (the
            // preferred leader moves to the old second replica, which
            // already has the data); the newcomer goes last.
            queue.members.retain(|m| *m != id);
            let exclude: BTreeSet<NodeId> = queue.members.iter().copied().collect();
            queue
                .members
                .extend(Self::least_loaded_replicas(&loads, &exclude, 1));
            Self::shift_loads(&mut loads, queue, true);
        }
        self.version += 1;
        MetaResponse::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(n: u64) -> ClusterState {
        let mut state = ClusterState::default();
        let addrs: Vec<(NodeId, String)> = (1..=n).map(|i| (i, format!("node{i}:1"))).collect();
        state.seed_members(addrs.iter().map(|(id, a)| (*id, a.as_str())));
        state
    }

    fn declare(state: &mut ClusterState, name: &str, rf: u32) -> QueueInfo {
        match state.apply(MetaCommand::DeclareQueue {
            name: name.into(),
            replication_factor: rf,
        }) {
            MetaResponse::Queue(info) => info,
            other => panic!("declare {name}: {other:?}"),
        }
    }

    fn counts(state: &ClusterState) -> BTreeMap<NodeId, Load> {
        state.count_loads()
    }

    #[test]
    fn leaders_and_replicas_spread_evenly() {
        for (n, rf) in [(3, 3), (3, 2), (4, 3), (5, 3), (3, 1)] {
            let mut state = cluster(n);
            let queues = 60;
            for i in 0..queues {
                let info = declare(&mut state, &format!("q{i}"), rf);
                assert_eq!(info.members.len(), rf as usize);
                let unique: BTreeSet<_> = info.members.iter().collect();
                assert_eq!(unique.len(), info.members.len());
            }
            let loads = counts(&state);
            let leaders: Vec<usize> = loads.values().map(|l| l.leaders).collect();
            let replicas: Vec<usize> = loads.values().map(|l| l.replicas).collect();
            let spread = |v: &[usize]| v.iter().max().unwrap() - v.iter().min().unwrap();
            assert!(spread(&leaders) <= 1, "n={n} rf={rf} leaders {leaders:?}");
            assert!(
                spread(&replicas) <= 2,
                "n={n} rf={rf} replicas {replicas:?}"
            );
        }
    }

    #[test]
    fn declare_is_idempotent_and_capped_by_cluster_size() {
        let mut state = cluster(2);
        let first = declare(&mut state, "a", 5);
        assert_eq!(first.members, vec![1, 2]);
        assert_eq!(first.group, group_id("a"));
        let version = state.version;
        assert_eq!(declare(&mut state, "a", 5), first);
        assert_eq!(state.version, version, "re-declare changes nothing");
    }

    #[test]
    fn no_members_no_queue() {
        let mut state = ClusterState::default();
        let response = state.apply(MetaCommand::DeclareQueue {
            name: "a".into(),
            replication_factor: 3,
        });
        assert!(matches!(response, MetaResponse::Rejected(_)));
        assert!(state.queues.is_empty());
    }

    #[test]
    fn remove_node_replaces_it_in_every_queue() {
        let mut state = cluster(4);
        for i in 0..20 {
            declare(&mut state, &format!("q{i}"), 3);
        }
        assert_eq!(
            state.apply(MetaCommand::RemoveNode { id: 2 }),
            MetaResponse::Done
        );
        assert!(!state.members.contains_key(&2));
        for queue in state.queues.values() {
            assert_eq!(queue.members.len(), 3, "{queue:?}");
            assert!(!queue.members.contains(&2), "{queue:?}");
        }
        // Again: nothing left to do.
        assert_eq!(
            state.apply(MetaCommand::RemoveNode { id: 2 }),
            MetaResponse::NotFound
        );
        let loads = counts(&state);
        let replicas: Vec<usize> = loads.values().map(|l| l.replicas).collect();
        assert_eq!(replicas, vec![20, 20, 20]);
    }

    #[test]
    fn remove_node_shrinks_when_nothing_to_spare() {
        let mut state = cluster(3);
        let info = declare(&mut state, "a", 3);
        let leader = info.members[0];
        state.apply(MetaCommand::RemoveNode { id: leader });
        let after = &state.queues["a"];
        assert_eq!(after.members, info.members[1..].to_vec());
    }

    #[test]
    fn last_member_cannot_leave() {
        let mut state = cluster(1);
        assert!(matches!(
            state.apply(MetaCommand::RemoveNode { id: 1 }),
            MetaResponse::Rejected(_)
        ));
        assert_eq!(state.members.len(), 1);
    }

    #[test]
    fn set_members_validates_and_moves_the_leader() {
        let mut state = cluster(3);
        let info = declare(&mut state, "a", 3);
        let mut moved = info.members.clone();
        moved.rotate_left(1);
        let response = state.apply(MetaCommand::SetQueueMembers {
            name: "a".into(),
            members: moved.clone(),
        });
        assert!(matches!(&response, MetaResponse::Queue(q) if q.members == moved));
        for bad in [vec![], vec![1, 1], vec![1, 9]] {
            let version = state.version;
            let response = state.apply(MetaCommand::SetQueueMembers {
                name: "a".into(),
                members: bad,
            });
            assert!(matches!(response, MetaResponse::Rejected(_)));
            assert_eq!(state.version, version);
        }
        assert_eq!(
            state.apply(MetaCommand::SetQueueMembers {
                name: "nope".into(),
                members: vec![1],
            }),
            MetaResponse::NotFound
        );
    }

    #[test]
    fn add_node_then_new_queues_use_it_and_delete_forgets() {
        let mut state = cluster(3);
        for i in 0..6 {
            declare(&mut state, &format!("q{i}"), 3);
        }
        state.apply(MetaCommand::AddNode {
            id: 4,
            info: NodeInfo {
                fabric: "node4:1".into(),
                amqp: Some("node4:5672".into()),
            },
        });
        let info = declare(&mut state, "new", 3);
        assert_eq!(info.members[0], 4, "the empty node leads first");
        assert_eq!(
            state.apply(MetaCommand::DeleteQueue { name: "new".into() }),
            MetaResponse::Done
        );
        assert_eq!(
            state.apply(MetaCommand::DeleteQueue { name: "new".into() }),
            MetaResponse::NotFound
        );
    }

    #[test]
    fn seeding_happens_once() {
        let mut state = cluster(3);
        state.apply(MetaCommand::RemoveNode { id: 3 });
        state.seed_members([(3, "node3:1")]);
        assert!(!state.members.contains_key(&3));
    }

    #[test]
    fn the_index_counts_what_a_full_walk_counts() {
        let mut state = cluster(4);
        for i in 0..40 {
            declare(&mut state, &format!("q{i}"), 3);
            if i % 7 == 0 {
                state.apply(MetaCommand::DeleteQueue {
                    name: format!("q{}", i / 2),
                });
            }
            if i == 20 {
                state.apply(MetaCommand::SetQueueMembers {
                    name: "q19".into(),
                    members: vec![4, 3],
                });
                state.apply(MetaCommand::RemoveNode { id: 2 });
            }
            assert_eq!(state.indexed_loads(), state.count_loads(), "after q{i}");
        }
        // A state read back from a snapshot has no index; it rebuilds one
        // and places the next queue exactly as the original does.
        let sealed = serde_json::to_vec(&state).unwrap();
        let mut back: ClusterState = serde_json::from_slice(&sealed).unwrap();
        assert_eq!(back, state);
        assert_eq!(
            declare(&mut back, "next", 3),
            declare(&mut state, "next", 3)
        );
        // A group id already held is refused through the index too.
        let taken = state.queues["q1"].clone();
        state.placement.add(
            &QueueInfo {
                name: "twin".into(),
                group: group_id("other"),
                members: taken.members.clone(),
            },
            state.version,
        );
        let response = state.apply(MetaCommand::DeclareQueue {
            name: "other".into(),
            replication_factor: 3,
        });
        assert!(
            matches!(&response, MetaResponse::Rejected(why) if why.contains("twin")),
            "{response:?}"
        );
    }
}
