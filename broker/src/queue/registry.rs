//! The node's queues by address: lookup, auto-create on first attach, and
//! the list for management and metrics. Transient queues live here;
//! quorum queues are looked up in (and created through) the node's
//! [`QuorumNode`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::address::{QueueAddress, QueueKind};
use super::transient::TransientQueue;
use super::{Queue, QueueStats};
use crate::config::QueuesConfig;
use crate::quorum::QuorumNode;

/// Why an address cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The queue does not exist and auto-create is off.
    #[error("queue {0} does not exist")]
    NotFound(String),
    /// The quorum queue could not be opened or created here.
    #[error("quorum queue {0} is unavailable: {1}")]
    QuorumUnavailable(String, String),
}

/// All queues of this node.
pub struct Registry {
    config: QueuesConfig,
    queues: RwLock<HashMap<QueueAddress, Arc<dyn Queue>>>,
    quorum: Option<Arc<QuorumNode>>,
}

impl Registry {
    /// A registry with the configured queues declared.
    pub fn new(config: QueuesConfig, quorum: Option<Arc<QuorumNode>>) -> Registry {
        let registry = Registry {
            queues: RwLock::new(HashMap::new()),
            config,
            quorum,
        };
        for name in registry.config.declare.clone() {
            if let Ok(address) = QueueAddress::parse(&format!("/queues/{name}")) {
                registry.create(address);
            }
        }
        registry
    }

    /// The node's quorum side, if it has one.
    pub fn quorum(&self) -> Option<&Arc<QuorumNode>> {
        self.quorum.as_ref()
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

    /// Make sure the queue at `address` can be looked up: opens or creates
    /// a quorum queue's Raft group (and waits for its leader). Transient
    /// queues need nothing here.
    pub async fn prepare(&self, address: &QueueAddress) -> Result<(), RegistryError> {
        if address.kind() != QueueKind::Quorum {
            return Ok(());
        }
        let Some(quorum) = &self.quorum else {
            return Err(RegistryError::QuorumUnavailable(
                address.to_string(),
                "this node has no quorum store".into(),
            ));
        };
        if quorum.get(address).is_some() {
            return Ok(());
        }
        if !self.config.auto_create {
            return Err(RegistryError::NotFound(address.to_string()));
        }
        quorum
            .ensure(address.name())
            .await
            .map(|_| ())
            .map_err(|e| RegistryError::QuorumUnavailable(address.to_string(), e.to_string()))
    }

    /// The queue at `address`: a quorum queue this node has open, or a
    /// transient queue (created if auto-create is on).
    pub fn lookup(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, RegistryError> {
        if address.kind() == QueueKind::Quorum {
            return match self.quorum.as_ref().and_then(|q| q.get(address)) {
                Some(queue) => Ok(queue),
                None => Err(RegistryError::NotFound(address.to_string())),
            };
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
        let mut queues: Vec<Arc<dyn Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        if let Some(quorum) = &self.quorum {
            queues.extend(quorum.queues().into_iter().map(|q| q as Arc<dyn Queue>));
        }
        let mut stats: Vec<QueueStats> = queues.iter().map(|q| q.stats()).collect();
        stats.sort_by(|a, b| a.address.cmp(&b.address));
        stats
    }
}
