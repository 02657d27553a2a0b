//! The node's record of the first quorum group whose Raft core quit on an
//! error (`node/fatal.rs` waits for it and fail-stops the node).
//!
//! Each group reports its own: its leadership watcher
//! (`leadership_watch.rs`) ends when openraft closes the group's metrics,
//! which happens only when the core ended, and then reads why from the
//! last metrics (`crate::raft::core_fault`). The node used to look for a
//! fault by reading every group's metrics once a second; at 10,000 idle
//! queues that walk over cold memory took about a quarter of an idle
//! node's CPU.

use std::future::Future;

use super::node::QuorumNode;
use crate::raft::FirstFault;

/// The first group fault: the queue's address and openraft's account of
/// why its core quit.
pub(crate) type GroupFault = (String, String);

/// Where the node's groups report a core that quit on an error.
pub(crate) type CoreFaults = FirstFault<GroupFault>;

/// Record that `queue`'s core quit for `reason`, unless a group's fault
/// was recorded before (the first is the one reported).
pub(crate) fn report(faults: &CoreFaults, queue: &str, reason: String) {
    if faults.record((queue.to_owned(), reason.clone())) {
        tracing::error!(%queue, %reason, "quorum group stopped on an error");
    }
}

impl QuorumNode {
    /// The first open group whose core quit on an error: its queue's
    /// address and the error.
    pub fn core_fault(&self) -> Option<(String, String)> {
        self.core_faults.current()
    }

    /// Resolves with the first group whose core quit on an error (at once
    /// if one did already); never resolves otherwise. Holds no handle of
    /// the node.
    pub(crate) fn core_faulted(&self) -> impl Future<Output = GroupFault> + Send + 'static {
        self.core_faults.wait()
    }
}
