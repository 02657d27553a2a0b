//! Purging and deleting a quorum queue, as an operator asks
//! (`ramqp-ctl queue purge|delete`).
//!
//! A purge goes through the group's log (`Command::Purge`), so every
//! replica removes the same messages: the leader names the highest id it
//! has applied and the ids it has out with consumers (they stay theirs to
//! settle), and each replica removes the rest at apply.
//!
//! A deletion is decided in the cluster metadata (the node assembly asks
//! it); each replica then closes its consumers with amqp:resource-deleted
//! and is wiped (`placement.rs`: its Raft group stopped, its log rows and
//! directory removed), so a queue declared again under the same name
//! starts empty.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::bodies::ApplyError;
use super::cluster_view::ReplicaSet;
use super::node::QuorumNode;
use super::queue::QuorumQueue;
use super::state_machine::BodyLimits;
use super::state_machine::Inner;
use super::types::{Command, SettleKind};
use crate::codec::definitions::condition;
use crate::queue::{Queue, QueueError, QueueEventKind};
use crate::raft::{group_id, GroupId};

/// How long a purge waits for its entry to commit.
const PURGE_COMMIT_WAIT: Duration = Duration::from_secs(10);

impl Inner {
    /// Apply a purge: remove every message up to `upto` but `except`.
    pub(crate) fn purge(
        &mut self,
        limits: &BodyLimits,
        upto: u64,
        except: &[u64],
    ) -> Result<(), ApplyError> {
        let kept: HashSet<u64> = except.iter().copied().collect();
        let ids: Vec<u64> = self
            .index
            .iter()
            .map(|slot| slot.id)
            .take_while(|id| *id <= upto)
            // The dead-letter outbox is not the queue's to purge: those
            // messages are on their way to the dead-letter queue.
            .filter(|id| !kept.contains(id) && !self.index.dead_letters().in_outbox(*id))
            .collect();
        for id in ids {
            self.settle(limits, id, SettleKind::Remove)?;
        }
        Ok(())
    }
}

impl QuorumQueue {
    /// Purge the queue through its log (this node must lead): the messages
    /// waiting now are removed on every replica; those out with consumers
    /// stay. Returns how many were waiting when the purge was proposed.
    pub async fn purge(&self) -> Result<usize, QueueError> {
        let (upto, except, waiting) = {
            let inner = self.shared.lock();
            if inner.deleted {
                return Err(QueueError::Gone(self.address().to_string()));
            }
            if !inner.leading {
                drop(inner);
                return Err(self.not_leader());
            }
            let Some(upto) = inner.index.last_id() else {
                return Ok(0);
            };
            let except = inner.dispatcher.out_ids();
            let waiting = inner.index.len().saturating_sub(except.len());
            (upto, except, waiting)
        };
        super::submit::lease_acknowledged(&self.raft).await;
        let write = self.raft.client_write(Command::Purge { upto, except });
        match tokio::time::timeout(PURGE_COMMIT_WAIT, write).await {
            Ok(Ok(_)) => Ok(waiting),
            Ok(Err(error)) => Err(QueueError::Refused(format!(
                "purge of {} not committed: {error}",
                self.address()
            ))),
            Err(_) => Err(QueueError::Refused(format!(
                "purge of {} not committed within {} s",
                self.address(),
                PURGE_COMMIT_WAIT.as_secs()
            ))),
        }
    }

    /// The queue was deleted: refuse everything from now on and close
    /// every consumer here, routed ones too (their links are detached
    /// with amqp:resource-deleted rather than moved to another leader).
    pub(crate) fn close_deleted(&self) {
        let mut inner = self.shared.lock();
        inner.deleted = true;
        inner.routed.clear();
        inner.orphans.clear();
        for consumer in inner.dispatcher.clear() {
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition: condition::RESOURCE_DELETED,
                    description: format!("queue {} was deleted", self.address()),
                },
            );
        }
    }

    /// Whether the queue was deleted (this replica serves nothing more).
    pub fn is_deleted(&self) -> bool {
        self.shared.lock().deleted
    }
}

/// Attempts to remove a stopped group's log rows (its Raft core lets go
/// of the log store shortly after `shutdown`).
const REMOVE_GROUP_TRIES: usize = 50;
/// Pause between those attempts.
const REMOVE_GROUP_PAUSE: Duration = Duration::from_millis(100);

impl QuorumNode {
    /// Wipe the replicas of queues the metadata declared once and no
    /// longer does: they were deleted (see [`QuorumNode::seen_declared`]).
    pub(super) async fn wipe_deleted(&self, declared: &[ReplicaSet]) {
        let groups: HashSet<GroupId> = declared.iter().map(|set| set.group).collect();
        let deleted: Vec<Arc<QuorumQueue>> = {
            let mut seen = self.seen_declared.lock().unwrap_or_else(|p| p.into_inner());
            seen.extend(groups.iter().copied());
            self.queues()
                .into_iter()
                .filter(|q| {
                    let group = group_id(q.address().name());
                    !groups.contains(&group) && seen.contains(&group)
                })
                .collect()
        };
        for queue in deleted {
            self.wipe(&queue).await;
        }
    }

    /// Stop and remove this node's replica of a deleted queue: consumers
    /// closed with amqp:resource-deleted, the group stopped, its log rows
    /// and its directory removed.
    async fn wipe(&self, queue: &Arc<QuorumQueue>) {
        let address = queue.address().clone();
        let group = group_id(address.name());
        tracing::info!(queue = %address, "deleted from the cluster; removing the replica here");
        queue.close_deleted();
        self.forget(group);
        if let Err(error) = queue.raft.shutdown().await {
            tracing::warn!(queue = %address, %error, "raft shutdown");
        }
        let mut removed = false;
        for _ in 0..REMOVE_GROUP_TRIES {
            match self.log_store().remove_group(group).await {
                Ok(()) => {
                    removed = true;
                    break;
                }
                Err(store_redb::Error::GroupOpen { .. }) => {
                    tokio::time::sleep(REMOVE_GROUP_PAUSE).await
                }
                Err(error) => {
                    tracing::warn!(queue = %address, %error, "removing the log rows");
                    break;
                }
            }
        }
        if !removed {
            // Keep the directory: with the rows still there, the group
            // would come back at the next start without its snapshot.
            tracing::warn!(queue = %address, "log rows not removed; replica left on disk");
            return;
        }
        if let Err(error) = std::fs::remove_dir_all(self.group_dir(group)) {
            tracing::warn!(queue = %address, %error, "removing the replica's directory");
        }
        self.seen_declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&group);
    }
}
