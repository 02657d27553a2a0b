//! An embedded cluster for tests: several broker nodes in one process, each
//! on its own ephemeral port and data directory, their Raft groups talking
//! through an in-process [`LocalTransport`] (the same serialized RPCs the
//! fabric carries between processes). Nodes can be stopped, restarted on
//! their data, and cut off from each other.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use store_redb::lossy_file::CrashSwitch;

use super::broker::{Broker, BrokerError};
use super::data_dir::TempDir;
use crate::config::BrokerConfig;
use crate::net::{LocalTransport, NodeId, NodeTransport};
use crate::queue::QueueAddress;
use crate::raft::lossy;

/// A cluster of broker nodes in this process.
pub struct Cluster {
    transport: Arc<LocalTransport>,
    configs: BTreeMap<NodeId, BrokerConfig>,
    running: BTreeMap<NodeId, Broker>,
    /// With [`Cluster::start_lossy`]: the power switch of each node's
    /// current incarnation.
    lossy: Option<BTreeMap<NodeId, Arc<CrashSwitch>>>,
    _dirs: Vec<TempDir>,
}

impl Cluster {
    /// Start `n` nodes (ids 1..=n) from `base`, each with its own temporary
    /// data directory that survives restarts of the node.
    pub async fn start(n: usize, base: BrokerConfig) -> Result<Cluster, BrokerError> {
        Cluster::start_with(n, base, false).await
    }

    /// Like [`Cluster::start`], but each node's Raft log store runs on a
    /// file that keeps its writes in memory until they are synced (a page
    /// cache), so that [`Cluster::crash`] loses exactly what a power cut
    /// would: everything not yet fsynced. (The metadata group's log and
    /// the segment files are plain files.)
    pub async fn start_lossy(n: usize, base: BrokerConfig) -> Result<Cluster, BrokerError> {
        Cluster::start_with(n, base, true).await
    }

    async fn start_with(n: usize, base: BrokerConfig, lossy: bool) -> Result<Cluster, BrokerError> {
        let ids: Vec<NodeId> = (1..=n as NodeId).collect();
        let mut cluster = Cluster {
            transport: LocalTransport::new(),
            configs: BTreeMap::new(),
            running: BTreeMap::new(),
            lossy: lossy.then(BTreeMap::new),
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
        if let (Some(switches), Some(dir)) = (self.lossy.as_mut(), config.data_dir.as_deref()) {
            switches.insert(id, lossy::arm(&crate::quorum::log_path(dir)));
        }
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

    /// A power cut of node `id` (clusters from [`Cluster::start_lossy`]):
    /// its Raft log loses every write not yet synced and refuses later
    /// ones, its links to the other nodes are cut so that nothing it says
    /// from then on is heard, and it is stopped; then the links are
    /// restored. [`Cluster::restart`] brings it back on what its disk kept.
    /// Returns how many written pages its log had not synced (lost).
    pub async fn crash(&mut self, id: NodeId) -> Result<u64, BrokerError> {
        self.crash_together(&[id]).await
    }

    /// A power cut of several nodes at the same instant (see
    /// [`Cluster::crash`]): every switch goes off before any node stops.
    /// Returns the unsynced pages lost, summed over the nodes.
    pub async fn crash_together(&mut self, ids: &[NodeId]) -> Result<u64, BrokerError> {
        let switches = self.switches(ids)?;
        let lost: u64 = switches.iter().map(|switch| switch.crash()).sum();
        self.stop_crashed(ids).await;
        Ok(lost)
    }

    /// A power cut of each of `ids` in the middle of a commit: its log lets
    /// `writes` more page writes into its page cache and loses them with
    /// the power at the next write or sync (a node that writes nothing
    /// within 5 s is cut then). Returns the unsynced pages lost, summed over the nodes.
    pub async fn crash_mid_write(
        &mut self,
        ids: &[NodeId],
        writes: u32,
    ) -> Result<u64, BrokerError> {
        let switches = self.switches(ids)?;
        for switch in &switches {
            switch.crash_at_write(writes);
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while switches.iter().any(|s| !s.is_crashed()) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let lost = switches
            .iter()
            .map(|s| {
                if s.is_crashed() {
                    s.lost_at_cut()
                } else {
                    s.crash()
                }
            })
            .sum();
        self.stop_crashed(ids).await;
        Ok(lost)
    }

    /// The power switches of `ids`' current incarnations.
    fn switches(&self, ids: &[NodeId]) -> Result<Vec<Arc<CrashSwitch>>, BrokerError> {
        ids.iter()
            .map(|id| {
                self.lossy
                    .as_ref()
                    .and_then(|s| s.get(id))
                    .cloned()
                    .ok_or_else(|| {
                        BrokerError::Config(format!(
                            "node {id} has no lossy log (start the cluster with start_lossy)"
                        ))
                    })
            })
            .collect()
    }

    /// Cut crashed nodes off (nothing they say after the power cut is
    /// heard) and take them off the transport (nothing listens for them
    /// any more, as for a process that died), stop them, then restore
    /// their links.
    async fn stop_crashed(&mut self, ids: &[NodeId]) {
        let all: Vec<NodeId> = self.configs.keys().copied().collect();
        for id in ids {
            for other in all.iter().filter(|n| *n != id) {
                self.transport.set_cut(*id, *other, true);
            }
            self.transport.unregister(*id);
        }
        for id in ids {
            self.stop(*id).await;
        }
        for id in ids {
            for other in all.iter().filter(|n| *n != id) {
                self.transport.set_cut(*id, *other, false);
            }
        }
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
        if self.lossy.is_some() {
            for config in self.configs.values() {
                if let Some(dir) = config.data_dir.as_deref() {
                    lossy::disarm(&crate::quorum::log_path(dir));
                }
            }
        }
    }
}
