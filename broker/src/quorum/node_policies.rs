//! The quorum node's side of queue policies (`queue/policy.rs`): putting
//! a replaced policy set on every open group, and the node's sweep of the
//! groups it leads that are on its sweep list (expiry and drop-head,
//! `sweep_list.rs`, `discard.rs`). Resolving a
//! group's policy when it opens is `node.rs`'s (`ensure_open`).

use std::sync::Arc;

use super::node::QuorumNode;
use super::sweep_list::SweepList;
use crate::queue::Queue;

impl QuorumNode {
    /// Set every open group's policy from the node's current set (after
    /// it was replaced).
    pub(crate) fn apply_policies(&self) {
        let set = self.policies.current();
        for queue in self.queues() {
            queue.set_policy(set.resolve(queue.address()));
        }
    }

    /// The groups the node's sweep visits, and its "sweep now" signal.
    pub(crate) fn sweep_list(&self) -> Arc<SweepList> {
        self.sweep_list.clone()
    }

    /// Have every quorum queue on the sweep list (those this node leads
    /// that may have something to discard) remove the expired messages at
    /// its head and what is past a drop-head limit (through its log), and
    /// the listed empty replicas give back their idle segment
    /// (`idle_shed.rs`).
    pub(crate) fn sweep_expired(&self) {
        for group in self.sweep_list.listed() {
            let queue = {
                let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
                groups.get(&group).map(|cell| cell.get().cloned())
            };
            match queue {
                Some(Some(queue)) => queue.sweep_expired(),
                // Still opening: its turn comes at the next sweep.
                Some(None) => {}
                // Closed or removed here.
                None => self.sweep_list.forget(group),
            }
        }
    }
}
