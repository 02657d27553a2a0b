//! When a routed queue may be let go. The node keeps a routed queue per
//! address its clients used (`node/registry.rs`); one that no link holds
//! and that has nothing left to send, settle or deliver is dropped by the
//! registry's sweep and made again by the next attach. At 10,000 quorum
//! queues each kept its follower task and state long after its clients
//! left (~0.4 KiB a queue on each node they were attached through).
//!
//! Dropping one ends its follower task at once (it holds a weak handle
//! and may be waiting with no timer) and closes the publishing link it
//! may still hold at a remote leader.
//!
//! It answers for one queue and must not know the registry.

use super::routed::{RoutedQueue, State, Target};

impl State {
    /// Whether a client's work is in it: a consumer, a publish pending or
    /// held back, a held settlement of a consumer that left. (What the
    /// follower task's `in_use` and `is_unused` below share.)
    pub(super) fn holds_work(&self) -> bool {
        !self.consumers.is_empty()
            || !self.pending.is_empty()
            || !self.backlog.is_empty()
            || !self.orphans.is_empty()
    }
}

impl RoutedQueue {
    /// Whether nothing is left in it: no work ([`State::holds_work`]) and
    /// no publisher waiting for room. (An open publishing link at a remote
    /// leader is closed when it is dropped.)
    pub(crate) fn is_unused(&self) -> bool {
        let state = self.lock();
        !state.holds_work() && state.waiters.is_empty()
    }
}

impl Drop for RoutedQueue {
    fn drop(&mut self) {
        // A stored permit if the task is not waiting now: it looks again,
        // finds the queue gone and ends.
        self.kick.notify_one();
        let state = self.state.get_mut();
        if let (Some(link), Target::Remote(node)) = (state.pub_link.take(), state.target) {
            self.fwd.close_link(node, link);
        }
    }
}
