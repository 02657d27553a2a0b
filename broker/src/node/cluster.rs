//! An embedded cluster for tests: several broker nodes in one process, each
//! on its own ephemeral port and data directory, their Raft groups talking
//! through an in-process [`LocalTransport`] (the same serialized RPCs the
//! fabric carries between processes). Nodes can be stopped, restarted on
//! their data, and cut off from each other.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use super::broker::{Broker, BrokerError};
use super::data_dir::TempDir;
use crate::config::BrokerConfig;
use crate::net::{LocalTransport, NodeId, NodeTransport};
use crate::queue::QueueAddress;

/// A cluster of broker nodes in this process.
pub struct Cluster {
    transport: Arc<LocalTransport>,
    configs: BTreeMap<NodeId, BrokerConfig>,
    running: BTreeMap<NodeId, Broker>,
    _dirs: Vec<TempDir>,
}

impl Cluster {
    /// Start `n` nodes (ids 1..=n) from `base`, each with its own temporary
    /// data directory that survives restarts of the node.
    pub async fn start(n: usize, base: BrokerConfig) -> Result<Cluster, BrokerError> {
        let ids: Vec<NodeId> = (1..=n as NodeId).collect();
        let mut cluster = Cluster {
            transport: LocalTransport::new(),
            configs: BTreeMap::new(),
            running: BTreeMap::new(),
            _dirs: Vec::new(),
        };
        for id in &ids {
            let dir = TempDir::new(&format!("ramqp-node{id}-")).map_err(|source| {
                BrokerError::DataDir {
                    path: std::env::temp_dir(),
                    source,
                }
            })?;
            let mut config = base.clone();
            config.data_dir = Some(dir.path().to_path_buf());
            config.quorum.node_id = *id;
            config.quorum.members = ids.clone();
            cluster._dirs.push(dir);
            cluster.configs.insert(*id, config);
        }
        for id in ids {
            cluster.restart(id).await?;
        }
        Ok(cluster)
    }

    /// The running node `id`.
    pub fn node(&self, id: NodeId) -> Option<&Broker> {
        self.running.get(&id)
    }

    /// Ids of the running nodes.
    pub fn running(&self) -> Vec<NodeId> {
        self.running.keys().copied().collect()
    }

    /// The AMQP address of node `id`, if it runs.
    pub fn addr(&self, id: NodeId) -> Option<SocketAddr> {
        self.running.get(&id).map(Broker::local_addr)
    }

    /// Stop node `id` (its connections are closed, its Raft groups stop).
    pub async fn stop(&mut self, id: NodeId) {
        if let Some(broker) = self.running.remove(&id) {
            broker.shutdown().await;
        }
    }

    /// Start node `id` again on its data directory and its previous port
    /// (a new port if that one is taken).
    pub async fn restart(&mut self, id: NodeId) -> Result<(), BrokerError> {
        self.stop(id).await;
        let Some(config) = self.configs.get_mut(&id) else {
            return Err(BrokerError::Config(format!("no node {id} in this cluster")));
        };
        let transport: Arc<dyn NodeTransport> = self.transport.clone();
        let broker =
            match Broker::start_with_transport(config.clone(), Some(transport.clone())).await {
                Err(BrokerError::Bind { .. }) if config.listen.port() != 0 => {
                    config.listen.set_port(0);
                    Broker::start_with_transport(config.clone(), Some(transport)).await?
                }
                other => other?,
            };
        config.listen = broker.local_addr();
        self.running.insert(id, broker);
        Ok(())
    }

    /// Cut (or heal) the link between two nodes (Raft and forwarding).
    pub fn set_partitioned(&self, a: NodeId, b: NodeId, cut: bool) {
        self.transport.set_cut(a, b, cut);
    }

    /// The leader of `/quorum/<name>` as seen by the running nodes.
    pub fn leader_of(&self, name: &str) -> Option<NodeId> {
        let address = QueueAddress::parse(&format!("/quorum/{name}")).ok()?;
        self.running
            .values()
            .filter_map(|b| b.quorum().get(&address))
            .filter_map(|q| q.leader())
            .find(|leader| self.running.contains_key(leader))
    }

    /// Stop every node.
    pub async fn shutdown(mut self) {
        let ids: Vec<NodeId> = self.running.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}
