//! The node's look for a quorum group whose Raft core quit on an error
//! (`node/fatal.rs` asks once a second and fail-stops the node on one).
//! It reads each open group's metrics under the group table's lock and
//! allocates nothing: at 10,000 queues the look, then with a copy of the
//! table, took a tenth of an idle node's CPU.

use openraft::async_runtime::watch::WatchReceiver;

use super::node::QuorumNode;
use crate::queue::Queue;

impl QuorumNode {
    /// The first open group whose core quit on an error: its queue's
    /// address and the error.
    pub fn core_fault(&self) -> Option<(String, String)> {
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        groups.values().find_map(|cell| {
            let queue = cell.get()?;
            let reason = crate::raft::core_fault(&queue.raft.metrics().borrow_watched())?;
            Some((queue.address().to_string(), reason))
        })
    }
}
