//! What queue placement counts, kept beside the
//! [`ClusterState`](super::ClusterState) so that declaring a queue does not
//! walk every queue: per node its preferred leaderships and replicas, and
//! which queue holds each group id. Declaring 10,000 queues one by one used
//! to walk the whole map twice per declaration: quadratic, 482 ms of every
//! node's CPU for 10,000 declarations (release build), 9.4 ms with this.
//!
//! Derived data only: never serialised (a state read from a snapshot
//! rebuilds it) and never compared. It knows the state's queues and
//! version, nothing of Raft or the network.

use std::collections::HashMap;

use super::state::QueueInfo;
use crate::net::NodeId;
use crate::raft::GroupId;

/// How many queues a node holds: its load for placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Load {
    /// Queues whose preferred leader it is.
    pub(super) leaders: usize,
    /// Queues it holds a replica of (the preferred leader's included).
    pub(super) replicas: usize,
}

impl Load {
    /// Count one replica in (`add`) or out; `leads` when it is the
    /// queue's preferred leader.
    pub(super) fn shift(&mut self, leads: bool, add: bool) {
        let step = |n: &mut usize| {
            *n = if add {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            }
        };
        step(&mut self.replicas);
        if leads {
            step(&mut self.leaders);
        }
    }
}

/// The placement counts of every queue, valid at one state version.
#[derive(Debug, Clone, Default)]
pub(super) struct PlacementIndex {
    /// The state version the counts are up to date with; `None` until
    /// first built.
    at: Option<u64>,
    /// Per node, members or not (placement filters by membership).
    loads: HashMap<NodeId, Load>,
    /// Which queue holds each group id.
    groups: HashMap<GroupId, String>,
}

impl PlacementIndex {
    /// Whether the counts are those of the state at `version`. Every
    /// change but a declaration moves the version without telling the
    /// index, which is then rebuilt once: those changes are rare.
    pub(super) fn is_at(&self, version: u64) -> bool {
        self.at == Some(version)
    }

    /// Count every queue afresh.
    pub(super) fn rebuild<'a>(
        &mut self,
        queues: impl Iterator<Item = &'a QueueInfo>,
        version: u64,
    ) {
        self.loads.clear();
        self.groups.clear();
        for info in queues {
            self.count(info);
        }
        self.at = Some(version);
    }

    /// Count a queue just added, the state now at `version`.
    pub(super) fn add(&mut self, info: &QueueInfo, version: u64) {
        self.count(info);
        self.at = Some(version);
    }

    fn count(&mut self, info: &QueueInfo) {
        for (position, id) in info.members.iter().enumerate() {
            self.loads
                .entry(*id)
                .or_default()
                .shift(position == 0, true);
        }
        self.groups.insert(info.group, info.name.clone());
    }

    /// The queue holding `group`, if any.
    pub(super) fn holder_of(&self, group: GroupId) -> Option<&str> {
        self.groups.get(&group).map(String::as_str)
    }

    /// `node`'s load.
    pub(super) fn load(&self, node: NodeId) -> Load {
        self.loads.get(&node).copied().unwrap_or_default()
    }
}

/// Derived data: two states are equal when what they record is.
impl PartialEq for PlacementIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PlacementIndex {}
