//! The node's queues by address: lookup, auto-create on first attach, and
//! the list for management and metrics. Transient queues owned by this
//! node live here; quorum queues are opened (and created) through the
//! node's [`QuorumNode`]. With forwarding, every `/quorum/` address and
//! every transient queue owned by another node is served through a
//! [`RoutedQueue`], which follows the queue's leader or owner.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::address::{QueueAddress, QueueKind};
use super::transient::TransientQueue;
use super::{Queue, QueueStats};
use crate::config::QueuesConfig;
use crate::forward::{Forwarder, RoutedQueue, Target};
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
    forwarder: Option<Arc<Forwarder>>,
    routed: RwLock<HashMap<QueueAddress, Arc<RoutedQueue>>>,
}

/// Poll period while an attach waits for a routed queue to find its target.
const TARGET_POLL: Duration = Duration::from_millis(10);

impl Registry {
    /// A registry with the configured queues declared.
    pub fn new(config: QueuesConfig, quorum: Option<Arc<QuorumNode>>) -> Registry {
        Self::with_forwarding(config, quorum, None)
    }

    /// A registry whose queues can be served by other nodes.
    pub(crate) fn with_forwarding(
        config: QueuesConfig,
        quorum: Option<Arc<QuorumNode>>,
        forwarder: Option<Arc<Forwarder>>,
    ) -> Registry {
        let registry = Registry {
            queues: RwLock::new(HashMap::new()),
            config,
            quorum,
            forwarder,
            routed: RwLock::new(HashMap::new()),
        };
        for name in registry.config.declare.clone() {
            if let Ok(address) = QueueAddress::parse(&format!("/queues/{name}")) {
                if registry.owns(&address) {
                    registry.create(address);
                }
            }
        }
        registry
    }

    /// The node's quorum side, if it has one.
    pub fn quorum(&self) -> Option<&Arc<QuorumNode>> {
        self.quorum.as_ref()
    }

    /// Whether this node holds the transient queue at `address` itself.
    fn owns(&self, address: &QueueAddress) -> bool {
        self.forwarder
            .as_ref()
            .is_none_or(|f| f.owner_of(address.name()) == f.node_id)
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

    /// The routed queue for `address`, made on first use.
    fn routed(&self, address: &QueueAddress) -> Option<Arc<RoutedQueue>> {
        if let Some(queue) = self
            .routed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(address)
        {
            return Some(queue.clone());
        }
        let forwarder = self.forwarder.as_ref()?;
        let (local, owner) = match address.kind() {
            QueueKind::Quorum => (self.quorum.as_ref().and_then(|q| q.get(address)), None),
            _ => (None, Some(forwarder.owner_of(address.name()))),
        };
        let mut routed = self.routed.write().unwrap_or_else(|p| p.into_inner());
        Some(
            routed
                .entry(address.clone())
                .or_insert_with(|| {
                    RoutedQueue::new(address.clone(), forwarder.clone(), local, owner)
                })
                .clone(),
        )
    }

    /// Make sure the queue at `address` can be looked up: opens or creates
    /// a quorum queue's Raft group (on a replica; a non-replica asks one),
    /// and waits, bounded, until a routed queue knows where it is served.
    pub async fn prepare(&self, address: &QueueAddress) -> Result<(), RegistryError> {
        if address.kind() != QueueKind::Quorum {
            if !self.owns(address) {
                if let Some(routed) = self.routed(address) {
                    self.wait_for_target(&routed).await;
                }
            }
            return Ok(());
        }
        let unavailable = |e: String| RegistryError::QuorumUnavailable(address.to_string(), e);
        let Some(quorum) = &self.quorum else {
            return Err(unavailable("this node has no quorum store".into()));
        };
        let exists = quorum.get(address).is_some()
            || self
                .routed
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(address);
        if !exists {
            if !self.config.auto_create {
                return Err(RegistryError::NotFound(address.to_string()));
            }
            // Declared in the cluster metadata first: its members decide
            // where the replicas are (see `quorum/placement.rs`).
            let members = quorum
                .place(address.name())
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let replica = members.contains(&quorum.node_id());
            match (&self.forwarder, replica) {
                (Some(forwarder), false) => forwarder
                    .create_remote(address)
                    .await
                    .map_err(unavailable)?,
                _ => {
                    quorum
                        .ensure(address.name())
                        .await
                        .map_err(|e| unavailable(e.to_string()))?;
                }
            }
        }
        if let Some(routed) = self.routed(address) {
            self.wait_for_target(&routed).await;
        }
        Ok(())
    }

    /// Wait (bounded by the leader wait) until `routed` knows its target,
    /// so a fresh link starts without a search.
    async fn wait_for_target(&self, routed: &RoutedQueue) {
        let wait = self
            .forwarder
            .as_ref()
            .map_or(Duration::ZERO, |f| f.leader_wait());
        let _ = tokio::time::timeout(wait, async {
            while matches!(routed.target(), Target::Searching(_)) {
                tokio::time::sleep(TARGET_POLL).await;
            }
        })
        .await;
    }

    /// The queue at `address` as the engine uses it: a routed queue for a
    /// quorum queue (served here or forwarded) or a transient queue owned
    /// elsewhere, else this node's transient queue (created if auto-create
    /// is on).
    pub fn lookup(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, RegistryError> {
        if address.kind() == QueueKind::Quorum {
            if self.forwarder.is_none() {
                return match self.quorum.as_ref().and_then(|q| q.get(address)) {
                    Some(queue) => Ok(queue),
                    None => Err(RegistryError::NotFound(address.to_string())),
                };
            }
            let known = self
                .routed
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(address)
                || self.quorum.as_ref().and_then(|q| q.get(address)).is_some();
            if !known {
                return Err(RegistryError::NotFound(address.to_string()));
            }
            return self
                .routed(address)
                .map(|q| q as Arc<dyn Queue>)
                .ok_or_else(|| RegistryError::NotFound(address.to_string()));
        }
        if !self.owns(address) {
            return self
                .routed(address)
                .map(|q| q as Arc<dyn Queue>)
                .ok_or_else(|| RegistryError::NotFound(address.to_string()));
        }
        self.local_transient(address)
    }

    fn local_transient(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, RegistryError> {
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

    /// The queue this node itself serves at `address`, for links forwarded
    /// from other nodes: the local quorum queue while this node leads it,
    /// or a transient queue this node owns. Never a routed queue, so a
    /// forwarded link is never forwarded again.
    pub(crate) fn local_queue(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, String> {
        if address.kind() == QueueKind::Quorum {
            let queue = self
                .quorum
                .as_ref()
                .and_then(|q| q.get(address))
                .ok_or_else(|| format!("{address} has no replica here"))?;
            if !queue.sync_leadership() {
                return Err(format!("this node does not lead {address}"));
            }
            return Ok(queue);
        }
        if !self.owns(address) {
            return Err(format!("this node does not own {address}"));
        }
        self.local_transient(address).map_err(|e| e.to_string())
    }

    /// Depth and consumers of every queue held here, sorted by address.
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
