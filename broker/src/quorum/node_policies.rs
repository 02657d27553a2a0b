//! The quorum node's side of queue policies (`queue/policy.rs`): putting
//! a replaced policy set on every open group, and the node's sweep of the
//! groups it leads (expiry and drop-head, `discard.rs`). Resolving a
//! group's policy when it opens is `node.rs`'s (`ensure_open`).

use std::sync::Arc;

use super::node::QuorumNode;
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

    /// Raised when a queue led here must drop its head at once.
    pub(crate) fn sweep_soon(&self) -> Arc<tokio::sync::Notify> {
        self.sweep_soon.clone()
    }

    /// Have every quorum queue this node leads remove the expired
    /// messages at its head (through its log).
    pub(crate) fn sweep_expired(&self) {
        for queue in self.queues() {
            queue.sweep_expired();
        }
    }
}
