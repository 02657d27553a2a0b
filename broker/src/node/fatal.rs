//! Fatal faults of a running node: the node-wide log store refusing writes
//! after a failed commit (an I/O error, a failed fsync, a full disk), or a
//! Raft group (a queue's or the metadata's) whose core quit on such an
//! error. Either leaves the node up but unable to serve the groups that
//! write there until it restarts and recovers from disk; nothing in
//! the process repairs it.
//!
//! Owns the watcher task and the [`FatalError`] it reports through
//! [`FatalWatch`] (what `Broker::fatal` hands out). It only observes: it
//! never exits the process nor stops the broker. The owner of the process
//! decides (`ramqp-brokerd` exits non-zero, a fail-stop; an embedder may
//! shut the broker down and start it again on the same data directory).
//!
//! How it watches: the store's failure is awaited (`LogStore::failed`,
//! set by its writer thread the moment a commit fails), and so is the
//! quorum side's first group whose core quit (`QuorumNode::core_faulted`:
//! a group's core can quit on a storage error of its own, a snapshot or
//! segment file, while the store stays healthy). The metadata group, one
//! per node, is checked every [`META_CHECK_INTERVAL`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::meta::Metadata;
use crate::quorum::QuorumNode;
use crate::raft::FirstFault;

/// How often the metadata group's running state is checked.
const META_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A fault after which this node serves its quorum queues no more until
/// it is restarted.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FatalError {
    /// A commit of the node-wide Raft log store failed; the store refuses
    /// every later write, so every Raft group of the node has stopped or
    /// stops at its next write.
    #[error("raft log store failed: {0}")]
    LogStore(#[source] Arc<store_redb::Error>),
    /// A Raft group's core quit on an error (its storage failed, or one of
    /// its tasks panicked).
    #[error("raft group {group} stopped: {reason}")]
    RaftGroup {
        /// The queue address, or `$meta` for the metadata group.
        group: String,
        /// openraft's account of why.
        reason: String,
    },
}

/// Where the first fatal fault of a node is published.
#[derive(Clone)]
pub(crate) struct FatalWatch(Arc<FirstFault<FatalError>>);

impl FatalWatch {
    pub(crate) fn new() -> FatalWatch {
        FatalWatch(Arc::default())
    }

    /// Records `error` unless a fault was recorded before (the first one is
    /// the cause; later ones follow from it).
    fn report(&self, error: FatalError) {
        if self.0.record(error.clone()) {
            tracing::error!(%error, "fatal: this node can no longer serve its quorum queues");
        }
    }

    /// The first fault, if there was one.
    pub(crate) fn current(&self) -> Option<FatalError> {
        self.0.current()
    }

    /// Resolves with the first fault (at once if there was one already);
    /// never resolves if the node stops without one.
    pub(crate) fn wait(&self) -> impl Future<Output = FatalError> + Send + 'static {
        self.0.wait()
    }
}

/// Starts the watcher: it reports the first fatal fault of the node's log
/// store or of any of its Raft groups to `watch`, then ends; it also ends
/// when `stopping` turns true or the node's parts are gone.
pub(crate) fn watch_node(
    watch: FatalWatch,
    quorum: &Arc<QuorumNode>,
    metadata: &Arc<Metadata>,
    mut stopping: watch::Receiver<bool>,
) {
    let store_failed = quorum.log_store().failed();
    let group_failed = quorum.core_faulted();
    let metadata = Arc::downgrade(metadata);
    tokio::spawn(async move {
        tokio::pin!(store_failed);
        tokio::pin!(group_failed);
        let mut check = tokio::time::interval(META_CHECK_INTERVAL);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                error = &mut store_failed => {
                    watch.report(FatalError::LogStore(error));
                    return;
                }
                (group, reason) = &mut group_failed => {
                    watch.report(FatalError::RaftGroup { group, reason });
                    return;
                }
                _ = check.tick() => {
                    let Some(metadata) = metadata.upgrade() else {
                        return;
                    };
                    if let Some(reason) = metadata.core_fault() {
                        watch.report(FatalError::RaftGroup {
                            group: crate::meta::META_GROUP_NAME.to_owned(),
                            reason,
                        });
                        return;
                    }
                }
                changed = stopping.changed() => {
                    if changed.is_err() || *stopping.borrow() {
                        return;
                    }
                }
            }
        }
    });
}
