//! The replicas the node's driver (`follower_tick.rs`) has to visit: only
//! those not settled. A replica settles when a visit finds it quiet for
//! good until something happens: a leader quiet (`quiet.rs`), a follower
//! whose leader's node vouches for it (`peer_liveness.rs`). A settled
//! replica is not visited at all, so an idle group costs nothing here; at
//! 10,000 queues the visits of every replica twice a second were half of
//! an idle node's CPU.
//!
//! What wakes a settled replica (puts it back on the list):
//! - a change of its group's metrics on a leader (a write, a vote, a
//!   change of members) or of its state, leader or vote on a follower
//!   (`leadership_watch.rs`);
//! - a change in any peer's liveness (lost, back, restarted), seen by the
//!   driver, which wakes every replica of the node (rare, and each visit
//!   then decides again).
//!
//! This file owns the list only; what a visit decides is the driver's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::node::QuorumNode;
use crate::raft::GroupId;

/// Groups woken since the driver last took them.
#[derive(Debug, Default)]
pub(crate) struct Visits {
    joins: Mutex<Vec<GroupId>>,
    /// How many replicas the driver's list held after its last pass.
    listed: AtomicUsize,
}

impl Visits {
    /// Put `group` on the list (the caller dedupes: `Quiet::wake`).
    pub(crate) fn join(&self, group: GroupId) {
        self.joins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(group);
    }

    /// The groups woken since the last call.
    pub(super) fn take(&self) -> Vec<GroupId> {
        std::mem::take(&mut *self.joins.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The driver's list holds `n` replicas.
    pub(super) fn set_listed(&self, n: usize) {
        self.listed.store(n, Ordering::Relaxed);
    }
}

impl QuorumNode {
    /// How many of this node's replicas its driver still visits (not
    /// settled quiet), as of its last pass: 0 in an idle cluster.
    pub fn replicas_visited(&self) -> usize {
        self.visits.listed.load(Ordering::Relaxed)
    }
}
