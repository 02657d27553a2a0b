//! Whether a Raft group's core stopped on an error: openraft ends a
//! group's core task when its storage fails (a log write, a vote, a
//! snapshot) or a task of it panics, and records why in the group's
//! metrics (`running_state`). The group then answers nothing and elects
//! no one until its node restarts: the node's owner must be told.
//!
//! Also the slot where a node keeps the first such fault ([`FirstFault`]).
//!
//! Knows nothing of what a group replicates; used by `crate::node` and
//! `crate::quorum` to watch every group of a node, queues and metadata
//! alike.

use openraft::error::Fatal;
use openraft::{RaftMetrics, RaftTypeConfig};

/// Why the group behind `metrics` stopped, if its core quit on an error.
/// `None` while it runs and after a requested stop (`Raft::shutdown`).
pub(crate) fn core_fault<C: RaftTypeConfig>(metrics: &RaftMetrics<C>) -> Option<String> {
    match &metrics.running_state {
        Ok(()) | Err(Fatal::Stopped) => None,
        Err(error) => Some(error.to_string()),
    }
}

/// The first fault a node recorded, and a way to wait for it: later ones
/// follow from the first and are dropped. Shared by the quorum side's
/// record of a group that stopped (`quorum/node_faults.rs`) and the
/// node's fatal-fault watch (`node/fatal.rs`).
pub(crate) struct FirstFault<T>(tokio::sync::watch::Sender<Option<T>>);

impl<T> Default for FirstFault<T> {
    fn default() -> Self {
        FirstFault(tokio::sync::watch::Sender::new(None))
    }
}

impl<T: Clone + Send + Sync + 'static> FirstFault<T> {
    /// Record `fault` unless one was recorded before; true if it was the
    /// first.
    pub(crate) fn record(&self, fault: T) -> bool {
        self.0.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(fault);
            true
        })
    }

    /// The first fault, if there was one.
    pub(crate) fn current(&self) -> Option<T> {
        self.0.borrow().clone()
    }

    /// Resolves with the first fault (at once if there was one already);
    /// never resolves if none comes before the slot is dropped. Holds no
    /// handle of the slot's owner.
    pub(crate) fn wait(&self) -> impl std::future::Future<Output = T> + Send + 'static {
        let mut fault = self.0.subscribe();
        async move {
            loop {
                if let Some(found) = fault.borrow_and_update().clone() {
                    return found;
                }
                if fault.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}
