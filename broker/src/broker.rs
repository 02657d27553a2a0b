//! The embedding API: [`Broker::start`] binds the AMQP listener, owns the
//! queue registry and the data directory, spawns one task per connection,
//! and shuts everything down gracefully.
//!
//! Many brokers can run in one process: nothing here is global.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::config::BrokerConfig;
use crate::engine::{self, ConnectionContext};
use crate::forward::Forwarder;
use crate::meta::{MetaOptions, Metadata, NodeInfo, META_GROUP};
use crate::net::{
    kind, CallFuture, Envelope, FabricSettings, FabricTransport, LocalTransport, NodeHandler,
    NodeId, NodeTransport,
};
use crate::queue::Registry;
use crate::quorum::QuorumNode;

/// Errors from starting or stopping a broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The listener could not bind its address.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The data directory could not be created or opened.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The quorum-queue store could not be opened.
    #[error("quorum queues: {0}")]
    Quorum(#[from] crate::quorum::QuorumError),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The fabric (inter-node gRPC) could not start.
    #[error("fabric: {0}")]
    Fabric(#[from] fabric::FabricError),
    /// The cluster metadata could not be opened.
    #[error("cluster metadata: {0}")]
    Metadata(#[from] crate::meta::MetaError),
}

/// Where the node keeps its data: a directory the user named, or a
/// temporary one removed when the broker goes away.
enum DataDir {
    Given(PathBuf),
    Temporary(tempfile::TempDir),
}

impl DataDir {
    fn path(&self) -> &Path {
        match self {
            DataDir::Given(path) => path,
            DataDir::Temporary(dir) => dir.path(),
        }
    }
}

/// A running broker node.
pub struct Broker {
    local_addr: SocketAddr,
    data_dir: DataDir,
    registry: Arc<Registry>,
    shutdown: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
    quorum: Arc<QuorumNode>,
    metadata: Arc<Metadata>,
    transport: Arc<dyn NodeTransport>,
    /// The fabric, when this node runs in cluster mode between processes.
    fabric: Option<Arc<FabricTransport>>,
    /// Registered (weakly) with the transport; kept alive here.
    _handler: Arc<NodeDispatcher>,
    _admin: Option<Arc<crate::admin::AdminService>>,
    node_id: u64,
}

/// The node's one transport handler: Raft envelopes go to the quorum node
/// (or the metadata group's), forwarding envelopes to the forwarder.
struct NodeDispatcher {
    quorum: Arc<QuorumNode>,
    metadata: Arc<Metadata>,
    forwarder: Arc<Forwarder>,
}

impl NodeHandler for NodeDispatcher {
    fn handle(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        match envelope.kind {
            kind::FORWARD_CALL => self.forwarder.clone().handle(from, envelope),
            _ if envelope.channel == META_GROUP => {
                let metadata = self.metadata.clone();
                Box::pin(async move { metadata.handle_rpc(envelope).await })
            }
            _ => self.quorum.clone().handle_rpc(envelope),
        }
    }

    fn message(&self, from: NodeId, envelope: Envelope) {
        self.forwarder.message(from, envelope);
    }
}

/// How long a graceful shutdown waits for connections to finish closing.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl Broker {
    /// Bind the listener and start serving. Must be called inside a tokio
    /// runtime; the broker's tasks run on that runtime.
    pub async fn start(config: BrokerConfig) -> Result<Broker, BrokerError> {
        Self::start_with_transport(config, None).await
    }

    /// Start a node that reaches the other nodes of its cluster through
    /// `transport` (the in-process one of [`crate::Cluster`], or the
    /// fabric); `None` for a node on its own.
    pub async fn start_with_transport(
        config: BrokerConfig,
        transport: Option<Arc<dyn NodeTransport>>,
    ) -> Result<Broker, BrokerError> {
        validate(&config)?;
        let data_dir = match &config.data_dir {
            Some(path) => {
                std::fs::create_dir_all(path).map_err(|source| BrokerError::DataDir {
                    path: path.clone(),
                    source,
                })?;
                DataDir::Given(path.clone())
            }
            None => DataDir::Temporary(
                tempfile::Builder::new()
                    .prefix("ramqp-")
                    .tempdir()
                    .map_err(|source| BrokerError::DataDir {
                        path: std::env::temp_dir(),
                        source,
                    })?,
            ),
        };
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| BrokerError::Bind {
            addr: config.listen,
            source,
        })?;
        let quorum_config = effective_quorum_config(&config);
        let node_id = quorum_config.node_id;
        let (transport, fabric): (Arc<dyn NodeTransport>, _) = match transport {
            Some(transport) => (transport, None),
            None => match config.cluster.fabric_listen {
                Some(listen) => {
                    let fabric = FabricTransport::start(FabricSettings {
                        node_id,
                        cluster_name: config.cluster.name.clone(),
                        listen,
                        peers: config
                            .cluster
                            .peers
                            .iter()
                            .map(|p| (p.id, p.fabric))
                            .collect(),
                        max_message_bytes: config.cluster.max_message_bytes,
                        call_timeout: Duration::from_millis(config.cluster.call_timeout_ms),
                    })
                    .await?;
                    (fabric.clone() as Arc<dyn NodeTransport>, Some(fabric))
                }
                None => (LocalTransport::new() as Arc<dyn NodeTransport>, None),
            },
        };
        let quorum = QuorumNode::open(data_dir.path(), transport.clone(), quorum_config.clone())
            .await
            .map_err(BrokerError::Quorum)?;
        let metadata = Metadata::open(
            node_id,
            &data_dir.path().join("meta"),
            quorum.log_store(),
            transport.clone(),
            quorum.raft_config(),
            initial_members(&config, &quorum_config),
            MetaOptions::new(quorum_config.replication_factor),
        )
        .await?;
        quorum.attach_metadata(metadata.clone());
        let forwarder = Forwarder::new(transport.clone(), quorum_config.clone(), quorum.clone());
        let registry = Arc::new(Registry::with_forwarding(
            config.queues.clone(),
            Some(quorum.clone()),
            Some(forwarder.clone()),
        ));
        forwarder.set_registry(&registry);
        let handler = Arc::new(NodeDispatcher {
            quorum: quorum.clone(),
            metadata: metadata.clone(),
            forwarder,
        });
        let weak: std::sync::Weak<dyn NodeHandler> = Arc::downgrade(&handler) as _;
        transport.register(node_id, weak);
        if let Some(fabric) = &fabric {
            // Ends by itself when the node stops (it holds weak handles).
            drop(fabric.follow_members(&metadata));
        }
        let admin = fabric.as_ref().map(|fabric| {
            let admin = Arc::new(crate::admin::AdminService::new(
                node_id,
                local_addr,
                registry.clone(),
                quorum.clone(),
                metadata.clone(),
                fabric.clone(),
                config.cluster.allow_fault_injection,
            ));
            let weak: std::sync::Weak<dyn crate::net::AdminHandler> = Arc::downgrade(&admin) as _;
            fabric.set_admin(weak);
            admin
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        let container_id = config
            .container_id
            .clone()
            .unwrap_or_else(|| format!("ramqp-{}", local_addr));
        let context = Arc::new(ConnectionContext {
            container_id,
            limits: config.limits.clone(),
            sasl: config.sasl.clone(),
            registry: registry.clone(),
        });
        let accept_task = tokio::spawn(accept_loop(listener, context, shutdown_rx));
        tracing::info!(%local_addr, data_dir = %data_dir.path().display(), "broker listening");
        Ok(Broker {
            local_addr,
            data_dir,
            registry,
            shutdown,
            accept_task,
            quorum,
            metadata,
            transport,
            fabric,
            _handler: handler,
            _admin: admin,
            node_id,
        })
    }

    /// The address the AMQP listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// An `amqp://host:port` URL for clients.
    pub fn url(&self) -> String {
        format!("amqp://{}", self.local_addr)
    }

    /// The node's data directory.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// This node's quorum-queue side (Raft groups).
    pub fn quorum(&self) -> &Arc<QuorumNode> {
        &self.quorum
    }

    /// This node's id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// Names and depths of the queues that exist now.
    pub fn queues(&self) -> Vec<crate::queue::QueueStats> {
        self.registry.stats()
    }

    /// Stop accepting, close every connection with amqp:connection:forced,
    /// and wait (up to a grace period) for their tasks to end.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let mut accept_task = self.accept_task;
        if tokio::time::timeout(SHUTDOWN_GRACE * 2, &mut accept_task)
            .await
            .is_err()
        {
            accept_task.abort();
        }
        // Still reachable while handing leadership away: the stopping
        // leader's vote lets the new leader win at once instead of after
        // the third node's lease. The queues' groups and the metadata
        // group hand off at the same time.
        tokio::join!(
            self.quorum.shutdown(),
            self.metadata.hand_off_before_stopping()
        );
        self.transport.unregister(self.node_id);
        self.metadata.shutdown().await;
        if let Some(fabric) = &self.fabric {
            fabric.shutdown().await;
        }
        tracing::info!(local_addr = %self.local_addr, "broker stopped");
    }

    /// The cluster metadata as this node has applied it.
    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.metadata
    }

    /// The fabric's listen address, in cluster mode.
    pub fn fabric_addr(&self) -> Option<SocketAddr> {
        self.fabric.as_ref().map(|f| f.local_addr())
    }
}

/// The quorum settings with the cluster's members filled in: in cluster
/// mode without an explicit `quorum.members`, this node and its peers.
fn effective_quorum_config(config: &BrokerConfig) -> crate::config::QuorumConfig {
    let mut quorum = config.quorum.clone();
    if quorum.members.is_empty() && !config.cluster.peers.is_empty() {
        quorum.members = std::iter::once(quorum.node_id)
            .chain(config.cluster.peers.iter().map(|p| p.id))
            .collect();
        quorum.members.sort_unstable();
        quorum.members.dedup();
    }
    quorum
}

/// The member set a fresh cluster's metadata group starts with: the same
/// on every node (ids and fabric addresses from the shared peer lists). A
/// node joining a running cluster starts with none and is added by an
/// operator (`ramqp-ctl add-node`).
fn initial_members(
    config: &BrokerConfig,
    quorum: &crate::config::QuorumConfig,
) -> std::collections::BTreeMap<NodeId, NodeInfo> {
    if config.cluster.join {
        return Default::default();
    }
    let mut members: std::collections::BTreeMap<NodeId, NodeInfo> =
        crate::quorum::cluster_members(quorum)
            .into_iter()
            .map(|id| (id, NodeInfo::default()))
            .collect();
    for peer in &config.cluster.peers {
        members.entry(peer.id).or_default().fabric = peer.fabric.to_string();
    }
    if let Some(listen) = config.cluster.fabric_listen {
        members.entry(quorum.node_id).or_default().fabric = listen.to_string();
    }
    members
}

fn validate(config: &BrokerConfig) -> Result<(), BrokerError> {
    let limits = &config.limits;
    if limits.max_frame_size_bytes < crate::codec::frame::MIN_MAX_FRAME_SIZE {
        return Err(BrokerError::Config(format!(
            "limits.max_frame_size_bytes must be at least {}",
            crate::codec::frame::MIN_MAX_FRAME_SIZE
        )));
    }
    if limits.link_credit == 0 || limits.session_window == 0 || limits.consumer_credit_max == 0 {
        return Err(BrokerError::Config(
            "limits.link_credit, session_window and consumer_credit_max must be positive".into(),
        ));
    }
    if !config.sasl.allow_anonymous && config.sasl.users.is_empty() {
        return Err(BrokerError::Config(
            "sasl.allow_anonymous is off and no sasl.users are configured: nobody could connect"
                .into(),
        ));
    }
    let cluster = &config.cluster;
    if cluster.peers.iter().any(|p| p.id == config.quorum.node_id) {
        return Err(BrokerError::Config(format!(
            "cluster.peers lists this node's own id {}",
            config.quorum.node_id
        )));
    }
    if cluster.fabric_listen.is_none() && (!cluster.peers.is_empty() || cluster.join) {
        return Err(BrokerError::Config(
            "cluster.peers and cluster.join need cluster.fabric_listen".into(),
        ));
    }
    if config.quorum.node_id == 0 {
        return Err(BrokerError::Config("quorum.node_id 0 is reserved".into()));
    }
    for name in &config.queues.declare {
        crate::queue::QueueAddress::parse(&format!("/queues/{name}"))
            .map_err(|e| BrokerError::Config(format!("queues.declare: {e}")))?;
    }
    Ok(())
}

/// Accept connections until shutdown, then wait for the connection tasks.
async fn accept_loop(
    listener: TcpListener,
    context: Arc<ConnectionContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(context.limits.max_connections));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let permit = slots.clone().try_acquire_owned().ok();
                    let context = context.clone();
                    let shutdown = shutdown.clone();
                    connections.spawn(async move {
                        engine::serve(stream, peer, context, permit, shutdown).await;
                    });
                }
                Err(error) => {
                    // Running out of file descriptors must not spin the loop.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = connections.len(),
            "connections did not close in time"
        );
        connections.abort_all();
    }
}
