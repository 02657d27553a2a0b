//! The node's queues by address: lookup, auto-create on first attach, and
//! the list for management and metrics.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::address::{QueueAddress, QueueKind};
use super::transient::TransientQueue;
use super::{Queue, QueueStats};
use crate::config::QueuesConfig;

/// Why an address cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The queue does not exist and auto-create is off.
    #[error("queue {0} does not exist")]
    NotFound(String),
    /// `/quorum/` queues need the quorum-queue support of a later release.
    #[error("quorum queues are not available on this node yet ({0})")]
    QuorumUnavailable(String),
}

/// All queues of this node.
pub struct Registry {
    config: QueuesConfig,
    queues: RwLock<HashMap<QueueAddress, Arc<dyn Queue>>>,
}

impl Registry {
    /// A registry with the configured queues declared.
    pub fn new(config: QueuesConfig) -> Registry {
        let registry = Registry {
            queues: RwLock::new(HashMap::new()),
            config,
        };
        for name in registry.config.declare.clone() {
            if let Ok(address) = QueueAddress::parse(&format!("/queues/{name}")) {
                registry.create(address);
            }
        }
        registry
    }

    fn create(&self, address: QueueAddress) -> Arc<dyn Queue> {
        let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
        queues
            .entry(address.clone())
            .or_insert_with(|| {
                tracing::info!(queue = %address, "queue created");
                Arc::new(TransientQueue::new(
                    address,
                    self.config.max_messages,
                    self.config.max_bytes,
                ))
            })
            .clone()
    }

    /// The queue at `address`, created if auto-create is on.
    pub fn lookup(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, RegistryError> {
        if address.kind() == QueueKind::Quorum {
            return Err(RegistryError::QuorumUnavailable(address.to_string()));
        }
        if let Some(queue) = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(address)
        {
            return Ok(queue.clone());
        }
        if !self.config.auto_create {
            return Err(RegistryError::NotFound(address.to_string()));
        }
        Ok(self.create(address.clone()))
    }

    /// Depth and consumers of every queue, sorted by address.
    pub fn stats(&self) -> Vec<QueueStats> {
        let queues: Vec<Arc<dyn Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let mut stats: Vec<QueueStats> = queues.iter().map(|q| q.stats()).collect();
        stats.sort_by(|a, b| a.address.cmp(&b.address));
        stats
    }
}
