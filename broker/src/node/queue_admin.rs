//! [`QueueAdmin`]: deleting and purging queues for the operator
//! (`ramqp-ctl queue delete|purge`, [`crate::Broker::delete_queue`]), over
//! the registry, the quorum node and the cluster metadata. It is admin's
//! [`QueueControl`]: a queue served by another node is answered with that
//! node, and admin passes the request on.
//!
//! - A transient queue is deleted or purged by the node that holds it.
//! - A quorum queue is deleted in the cluster metadata (from any node);
//!   each replica then wipes itself (`quorum/removal.rs`). It is purged by
//!   its leader, through its Raft log.

use std::sync::Arc;

use crate::admin::{purge_summary, ControlFuture, QueueChange, QueueControl, QueueControlError};
use crate::meta::Metadata;
use crate::queue::{QueueAddress, QueueError, QueueKind};
use crate::quorum::QuorumNode;

use super::registry::Registry;

/// Deletes and purges queues on behalf of the operator.
pub(crate) struct QueueAdmin {
    pub(crate) registry: Arc<Registry>,
    pub(crate) quorum: Arc<QuorumNode>,
    pub(crate) metadata: Arc<Metadata>,
}

fn parse(address: &str) -> Result<QueueAddress, QueueControlError> {
    QueueAddress::parse(address).map_err(|e| QueueControlError::BadAddress(e.to_string()))
}

impl QueueAdmin {
    async fn delete_queue(&self, address: &str) -> Result<QueueChange, QueueControlError> {
        let address = parse(address)?;
        if address.kind() == QueueKind::Transient {
            let owner = self.registry.owner_of(&address);
            if owner != self.quorum.node_id() {
                return Ok(QueueChange::Elsewhere(owner));
            }
            return match self.registry.delete_transient(&address) {
                Some(held) => Ok(QueueChange::Done(format!(
                    "deleted {address} ({held} messages)"
                ))),
                None => Err(QueueControlError::NotFound(address.to_string())),
            };
        }
        let held = self.quorum.get(&address).map(|q| {
            let stats = crate::queue::Queue::stats(q.as_ref());
            stats.ready + stats.unsettled
        });
        match self.metadata.delete_queue(address.name()).await {
            // Each replica wipes itself once it applies the deletion.
            Ok(true) => Ok(QueueChange::Done(match held {
                Some(held) => format!("deleted {address} ({held} messages)"),
                None => format!("deleted {address}"),
            })),
            Ok(false) => Err(QueueControlError::NotFound(address.to_string())),
            Err(error) => Err(QueueControlError::Failed(error.to_string())),
        }
    }

    async fn purge_queue(&self, address: &str) -> Result<QueueChange, QueueControlError> {
        let address = parse(address)?;
        if address.kind() == QueueKind::Transient {
            let owner = self.registry.owner_of(&address);
            if owner != self.quorum.node_id() {
                return Ok(QueueChange::Elsewhere(owner));
            }
            return match self.registry.purge_transient(&address) {
                Some(n) => Ok(QueueChange::Done(purge_summary(&address.to_string(), n))),
                None => Err(QueueControlError::NotFound(address.to_string())),
            };
        }
        let Some(queue) = self.quorum.get(&address) else {
            // Not a replica here: one of its replicas knows the leader.
            return match self.quorum.replicas(address.name()).first() {
                Some(node) if self.quorum.declaration(address.name()) != Some(false) => {
                    Ok(QueueChange::Elsewhere(*node))
                }
                _ => Err(QueueControlError::NotFound(address.to_string())),
            };
        };
        match queue.purge().await {
            Ok(n) => Ok(QueueChange::Done(purge_summary(&address.to_string(), n))),
            Err(QueueError::NotLeader {
                leader: Some(leader),
                ..
            }) => Ok(QueueChange::Elsewhere(leader)),
            Err(QueueError::Gone(_)) => Err(QueueControlError::NotFound(address.to_string())),
            Err(error) => Err(QueueControlError::Failed(error.to_string())),
        }
    }
}

impl QueueControl for QueueAdmin {
    fn delete<'a>(&'a self, address: &'a str) -> ControlFuture<'a> {
        Box::pin(self.delete_queue(address))
    }

    fn purge<'a>(&'a self, address: &'a str) -> ControlFuture<'a> {
        Box::pin(self.purge_queue(address))
    }
}
