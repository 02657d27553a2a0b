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

/// The count, shared by every group network of a node. The default
/// counts nothing (a network nobody reads the count of, such as the
/// metadata group's): no allocation for it.
#[derive(Debug, Clone, Default)]
pub struct OpenClients(Option<Arc<AtomicUsize>>);

impl OpenClients {
    /// A count starting at 0.
    pub(crate) fn counted() -> OpenClients {
        OpenClients(Some(Arc::default()))
    }

    /// Connections open now.
    pub fn get(&self) -> usize {
        self.0.as_ref().map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// Counts one more until the returned guard drops.
    pub(crate) fn open(&self) -> OpenClient {
        if let Some(n) = &self.0 {
            n.fetch_add(1, Ordering::Relaxed);
        }
        OpenClient(self.0.clone())
    }
}

/// One open connection, counted while it lives.
#[derive(Debug)]
pub(crate) struct OpenClient(Option<Arc<AtomicUsize>>);

impl Drop for OpenClient {
    fn drop(&mut self) {
        if let Some(n) = &self.0 {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_counts_while_it_lives() {
        let uncounted = OpenClients::default();
        let guard = uncounted.open();
        assert_eq!(uncounted.get(), 0, "the default counts nothing");
        drop(guard);
        let clients = OpenClients::counted();
        let a = clients.open();
        let b = clients.clone().open();
        assert_eq!(clients.get(), 2);
        drop(a);
        assert_eq!(clients.get(), 1);
        drop(b);
        assert_eq!(clients.get(), 0);
    }
}
