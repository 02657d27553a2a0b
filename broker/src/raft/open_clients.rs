//! How many connections of Raft groups to their peers are open on a node
//! (openraft asks the group's network for one per replication stream, per
//! heartbeat worker, and per vote or snapshot it sends). A quiet leader
//! closes its streams and workers (`quorum/follower_tick.rs` asks its core
//! to quiesce), so on an idle node this is about 0: what an operator or a
//! test reads to see that idle groups hold no replication.
//!
//! Knows nothing of what a group replicates.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The count, shared by every group network of a node.
#[derive(Debug, Clone, Default)]
pub struct OpenClients(Arc<AtomicUsize>);

impl OpenClients {
    /// Connections open now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more until the returned guard drops.
    pub(crate) fn open(&self) -> OpenClient {
        self.0.fetch_add(1, Ordering::Relaxed);
        OpenClient(self.0.clone())
    }
}

/// One open connection, counted while it lives.
#[derive(Debug)]
pub(crate) struct OpenClient(Arc<AtomicUsize>);

impl Drop for OpenClient {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_counts_while_it_lives() {
        let clients = OpenClients::default();
        let a = clients.open();
        let b = clients.clone().open();
        assert_eq!(clients.get(), 2);
        drop(a);
        assert_eq!(clients.get(), 1);
        drop(b);
        assert_eq!(clients.get(), 0);
    }
}
