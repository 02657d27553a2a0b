//! The embedding API: [`Broker::start`] assembles a node (data directory,
//! transport, quorum side, cluster metadata, forwarding, queue registry,
//! operator service), binds the AMQP listener and shuts it all down
//! gracefully. This is the one place that knows every part of a node.
//!
//! Many brokers can run in one process: nothing here is global.

use super::queue_admin::QueueAdmin;
use crate::admin::{QueueChange, QueueControl, QueueControlError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::accept::{accept_loop, Listeners, SHUTDOWN_GRACE};
use super::data_dir::DataDir;
use super::dead_letter_router::DeadLetterPublisher;
use super::dispatcher::NodeDispatcher;
use super::fabric::{FabricSettings, FabricTransport};
use super::fatal::{watch_node, FatalError, FatalWatch};
use super::http_view::{self, HttpView};
use super::policies::NodePolicies;
use super::registry::Registry;
use super::replica_sets::MetadataReplicaSets;
use super::startup::{effective_quorum_config, fabric_tls, initial_members, validate};
use crate::admin::{AdminHandler, AdminService, FabricControl};
use crate::auth::{AuthError, Authenticator};
use crate::config::PolicyConfig;
use crate::config::{BrokerConfig, QuorumConfig};
use crate::engine::{ConnectionContext, EngineCounters, LiveConnections};
use crate::forward::{Forwarder, LocalQueues, PeerAsker};
use crate::meta::{MetaOptions, Metadata};
use crate::net::{LocalTransport, NodeHandler, NodeTransport};
use crate::queue::QueueStats;
use crate::queue::{Policies, PolicyError, PolicySet, QueueAddress, QueueDirectory, QueuePolicy};
use crate::quorum::QuorumNode;
use crate::tls::{TlsError, TlsServer};

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
    /// The TLS certificate, key or client CA could not be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The users file (or the plaintext users) could not be used.
    #[error(transparent)]
    Auth(#[from] AuthError),
}

/// What [`Broker::reload`] did: `None` where there is nothing to reload.
#[derive(Debug)]
pub struct Reloaded {
    /// The TLS certificate, key and client CA, read again.
    pub tls: Option<Result<(), TlsError>>,
    /// The users file, read again: its number of users.
    pub users: Option<Result<usize, AuthError>>,
}

/// A running broker node.
pub struct Broker {
    local_addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    ws_addr: Option<SocketAddr>,
    http_addr: Option<SocketAddr>,
    /// The HTTP endpoint's task, when there is one.
    http_task: Option<tokio::task::JoinHandle<()>>,
    tls: Option<Arc<TlsServer>>,
    auth: Arc<Authenticator>,
    users_file: bool,
    data_dir: DataDir,
    registry: Arc<Registry>,
    control: Arc<QueueAdmin>,
    shutdown: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
    quorum: Arc<QuorumNode>,
    metadata: Arc<Metadata>,
    transport: Arc<dyn NodeTransport>,
    /// The fabric, when this node runs in cluster mode between processes.
    fabric: Option<Arc<FabricTransport>>,
    /// Registered (weakly) with the transport; kept alive here.
    _handler: Arc<NodeDispatcher>,
    _admin: Arc<AdminService>,
    node_id: u64,
    /// The first fatal fault of the node's storage, once there is one.
    fatal: FatalWatch,
    /// The queue policies and the queues they are put on.
    policies: Arc<NodePolicies>,
}

/// The node's parts that serve queues, assembled in order (each step
/// needs the ones before it).
struct Parts {
    quorum: Arc<QuorumNode>,
    metadata: Arc<Metadata>,
    forwarder: Arc<Forwarder>,
    registry: Arc<Registry>,
    control: Arc<QueueAdmin>,
    policies: Arc<NodePolicies>,
}

impl Broker {
    /// Bind the listener and start serving. Must be called inside a tokio
    /// runtime; the broker's tasks run on that runtime.
    pub async fn start(config: BrokerConfig) -> Result<Broker, BrokerError> {
        Self::start_with_transport(config, None).await
    }

    /// Start a node that reaches the other nodes of its cluster through
    /// `transport` (the in-process one of an embedded cluster, or the
    /// fabric); `None` for a node on its own (or the fabric, when the
    /// configuration names a fabric listener).
    pub async fn start_with_transport(
        config: BrokerConfig,
        transport: Option<Arc<dyn NodeTransport>>,
    ) -> Result<Broker, BrokerError> {
        validate(&config)?;
        let data_dir = DataDir::open(config.data_dir.as_deref())
            .map_err(|(path, source)| BrokerError::DataDir { path, source })?;
        let auth = Arc::new(Authenticator::from_config(&config.sasl)?);
        let tls = TlsServer::load(&config.tls)?.map(Arc::new);
        let plain = match config.listen_plain {
            true => Some(bind(config.listen).await?),
            false => None,
        };
        let secure = match config.tls.listen {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let websocket = match config.websocket.listen {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let ws_addr = match (&websocket, config.websocket.listen) {
            (Some(l), Some(addr)) => Some(bound_addr(l, addr)?),
            _ => None,
        };
        let http = match config.http.listen {
            Some(addr) => {
                let listener = bind(addr).await?;
                let bound = bound_addr(&listener, addr)?;
                Some((listener, bound))
            }
            None => None,
        };
        let http_addr = http.as_ref().map(|(_, addr)| *addr);
        let plain_addr = plain
            .as_ref()
            .map(|l| bound_addr(l, config.listen))
            .transpose()?;
        let tls_addr = match (&secure, config.tls.listen) {
            (Some(l), Some(addr)) => Some(bound_addr(l, addr)?),
            _ => None,
        };
        let Some(local_addr) = plain_addr.or(tls_addr) else {
            return Err(BrokerError::Config("no AMQP listener".into()));
        };
        let quorum_config = effective_quorum_config(&config);
        let node_id = quorum_config.node_id;
        let (transport, fabric) = match transport {
            Some(transport) => (transport, None),
            None => start_transport(&config, node_id).await?,
        };
        let parts = assemble(&config, &quorum_config, data_dir.path(), &transport).await?;
        let handler = Arc::new(NodeDispatcher {
            quorum: parts.quorum.clone(),
            metadata: parts.metadata.clone(),
            forwarder: parts.forwarder.clone(),
        });
        let weak: Weak<dyn NodeHandler> = Arc::downgrade(&handler) as _;
        transport.register(node_id, weak);
        let admin = start_admin(&config, node_id, local_addr, &parts, fabric.as_ref());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let fatal = FatalWatch::new();
        watch_node(
            fatal.clone(),
            &parts.quorum,
            &parts.metadata,
            shutdown_rx.clone(),
        );
        let engine_counters = Arc::new(EngineCounters::default());
        let connections = Arc::new(LiveConnections::default());
        let http_tls = match config.http.tls {
            true => tls.clone(),
            false => None,
        };
        let http_task = http.map(|(listener, _)| {
            let view = HttpView {
                registry: parts.registry.clone(),
                fatal: fatal.clone(),
                stopping: shutdown_rx.clone(),
                auth: auth.clone(),
                fabric: fabric.clone(),
                policies: parts.policies.clone(),
            };
            let sources = crate::http::Sources {
                node_id,
                quorum: parts.quorum.clone(),
                metadata: parts.metadata.clone(),
                engine: engine_counters.clone(),
                node: Arc::new(view),
                last_scrape_bytes: Default::default(),
                admin: admin.clone(),
                queues: parts.registry.clone() as Arc<dyn QueueDirectory>,
                connections: connections.clone(),
                auth: auth.clone(),
                cluster_name: config.cluster.name.clone(),
                queue_settings: crate::http::QueueSettings {
                    transient_max_messages: config.queues.max_messages,
                    transient_max_bytes: config.queues.max_bytes,
                    quorum_max_inflight_publishes: config.quorum.max_inflight_publishes,
                    quorum_queue_resident_budget_bytes: config.quorum.queue_resident_budget_bytes,
                    quorum_publish_timeout_ms: config.quorum.publish_timeout_ms,
                },
            };
            http_view::start(listener, sources, http_tls, shutdown_rx.clone())
        });
        let context = Arc::new(ConnectionContext {
            container_id: config
                .container_id
                .clone()
                .unwrap_or_else(|| format!("ramqp-{local_addr}")),
            limits: config.limits.clone(),
            auth: auth.clone(),
            queues: parts.registry.clone() as Arc<dyn QueueDirectory>,
            counters: engine_counters,
            connections,
        });
        let listeners = Listeners {
            plain,
            secure,
            websocket,
            ws_max_message_bytes: config.websocket.max_message_bytes,
            tls: tls.clone(),
        };
        let accept_task = tokio::spawn(accept_loop(listeners, context, shutdown_rx));
        tracing::info!(%local_addr, ?tls_addr, ?ws_addr, ?http_addr, data_dir = %data_dir.path().display(), "broker listening");
        Ok(Broker {
            local_addr,
            tls_addr,
            ws_addr,
            http_addr,
            http_task,
            tls,
            auth,
            users_file: config.sasl.users_file.is_some(),
            data_dir,
            registry: parts.registry,
            control: parts.control,
            shutdown,
            accept_task,
            quorum: parts.quorum,
            metadata: parts.metadata,
            transport,
            fabric,
            _handler: handler,
            _admin: admin,
            node_id,
            fatal,
            policies: parts.policies,
        })
    }

    /// The address the plain AMQP listener is bound to (the TLS
    /// listener's when there is no plain one).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address the TLS (amqps) listener is bound to, if there is one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The address the WebSocket listener is bound to, when there is one
    /// (wss when TLS is configured).
    pub fn ws_addr(&self) -> Option<SocketAddr> {
        self.ws_addr
    }

    /// The address the HTTP endpoint (`/healthz`, `/readyz`, `/metrics`)
    /// is bound to, when there is one.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Read the TLS files and the users file again (SIGHUP in
    /// `ramqp-brokerd`); new connections use them, open ones keep what
    /// they started with. A part that fails keeps its old configuration.
    pub fn reload(&self) -> Reloaded {
        Reloaded {
            tls: self.tls.as_ref().map(|tls| tls.reload()),
            users: self.users_file.then(|| self.auth.reload()),
        }
    }

    /// Replace the node's queue policies (SIGHUP in `ramqp-brokerd`,
    /// `PUT /api/policies`) and put them on every open queue of this node;
    /// the number in force. A refused set changes nothing.
    pub fn set_policies(&self, policies: &[PolicyConfig]) -> Result<usize, PolicyError> {
        self.policies.replace(policies)
    }

    /// The node's queue policies in force, in order.
    pub fn policies(&self) -> Vec<PolicyConfig> {
        self.policies.current()
    }

    /// The policy the queue at `address` has on this node now (`None`:
    /// none matches, or no such queue or replica here).
    pub fn queue_policy(&self, address: &str) -> Option<Arc<QueuePolicy>> {
        self.policies.of_queue(&QueueAddress::parse(address).ok()?)
    }

    /// Failed logins since start (each was answered with SASL outcome
    /// `auth` after the throttle's delay).
    pub fn login_failures(&self) -> u64 {
        self.auth.throttle().failures_total()
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

    /// How many routed queues this node holds (`route_sweep.rs`).
    pub fn routed_queues(&self) -> usize {
        self.registry.routes()
    }

    /// This node's id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// Delete the queue at `address` (what `ramqp-ctl queue delete` asks):
    /// its links are detached with amqp:resource-deleted. A transient queue
    /// must be asked of the node holding it, which
    /// [`QueueChange::Elsewhere`] names otherwise; a quorum queue's
    /// deletion is recorded in the cluster metadata from any node, and
    /// each replica then removes itself.
    pub async fn delete_queue(&self, address: &str) -> Result<QueueChange, QueueControlError> {
        self.control.delete(address).await
    }

    /// Drop the messages waiting in the queue at `address` (what
    /// `ramqp-ctl queue purge` asks); messages out with consumers stay. A
    /// quorum queue is purged by its leader through its Raft log
    /// ([`QueueChange::Elsewhere`] names the node to ask otherwise).
    pub async fn purge_queue(&self, address: &str) -> Result<QueueChange, QueueControlError> {
        self.control.purge(address).await
    }

    /// Resolves with the first fatal fault of this node: its Raft log store
    /// refused a write (an I/O error, a failed fsync, a full disk) or one
    /// of its Raft groups stopped on such an error. From then on the node
    /// serves none of the affected quorum queues until it is restarted on
    /// its data directory, which recovers what was committed. The broker
    /// does not stop by itself: the caller decides (`ramqp-brokerd` exits
    /// non-zero at once; an embedder may `shutdown` and start again).
    ///
    /// The future holds no handle of the broker, so it can be awaited
    /// next to a `shutdown` signal; it never resolves if the broker stops
    /// without a fault.
    pub fn fatal(&self) -> impl std::future::Future<Output = FatalError> + Send + 'static {
        self.fatal.wait()
    }

    /// Names and depths of the queues that exist now.
    pub fn queues(&self) -> Vec<QueueStats> {
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
        // Until here /readyz answered "shutting down".
        if let Some(task) = self.http_task {
            task.abort();
            let _ = task.await;
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

fn bound_addr(listener: &TcpListener, asked: SocketAddr) -> Result<SocketAddr, BrokerError> {
    listener.local_addr().map_err(|source| BrokerError::Bind {
        addr: asked,
        source,
    })
}

async fn bind(listen: SocketAddr) -> Result<TcpListener, BrokerError> {
    TcpListener::bind(listen)
        .await
        .map_err(|source| BrokerError::Bind {
            addr: listen,
            source,
        })
}

/// The transport a node makes for itself: the gRPC fabric when the
/// configuration names a fabric listener, else an in-process one (a node
/// alone).
async fn start_transport(
    config: &BrokerConfig,
    node_id: u64,
) -> Result<(Arc<dyn NodeTransport>, Option<Arc<FabricTransport>>), BrokerError> {
    let Some(listen) = config.cluster.fabric_listen else {
        return Ok((LocalTransport::new() as Arc<dyn NodeTransport>, None));
    };
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
        tls: fabric_tls(&config.cluster.tls)?,
    })
    .await?;
    Ok((fabric.clone() as Arc<dyn NodeTransport>, Some(fabric)))
}

/// Open the quorum side and the cluster metadata on the node's data, wire
/// them to each other and to forwarding, and make the queue registry.
async fn assemble(
    config: &BrokerConfig,
    quorum_config: &QuorumConfig,
    data_dir: &Path,
    transport: &Arc<dyn NodeTransport>,
) -> Result<Parts, BrokerError> {
    let node_id = quorum_config.node_id;
    let set =
        PolicySet::compile(&config.policies).map_err(|e| BrokerError::Config(e.to_string()))?;
    let policies = Arc::new(Policies::new(set));
    let quorum = QuorumNode::open(
        data_dir,
        transport.clone(),
        quorum_config.clone(),
        policies.clone(),
    )
    .await
    .map_err(BrokerError::Quorum)?;
    let metadata = Metadata::open(
        node_id,
        &data_dir.join("meta"),
        quorum.log_store(),
        transport.clone(),
        quorum.raft_config(),
        initial_members(config, quorum_config),
        MetaOptions::new(quorum_config.replication_factor),
    )
    .await?;
    quorum.attach_peer_requests(Arc::new(PeerAsker {
        node_id,
        transport: transport.clone(),
    }));
    quorum.attach_replica_sets(Arc::new(MetadataReplicaSets(metadata.clone())));
    let forwarder = Forwarder::new(transport.clone(), quorum_config.clone(), quorum.clone());
    let (dead_letters, dead_letter_task) = DeadLetterPublisher::new();
    let registry = Arc::new(Registry::new(
        config.queues.clone(),
        quorum.clone(),
        forwarder.clone(),
        policies.clone(),
        dead_letters.clone(),
    ));
    dead_letter_task.serve(Arc::downgrade(&registry));
    quorum.attach_dead_letter_router(dead_letters.clone());
    let local: Weak<dyn LocalQueues> = Arc::downgrade(&registry) as _;
    forwarder.set_local_queues(local);
    let control = Arc::new(QueueAdmin {
        registry: registry.clone(),
        quorum: quorum.clone(),
        metadata: metadata.clone(),
    });
    super::expiry_sweep::spawn(Arc::downgrade(&registry), Arc::downgrade(&quorum));
    super::route_sweep::spawn(Arc::downgrade(&registry), config.queues.route_sweep_ms);
    let policies = Arc::new(NodePolicies::new(
        policies,
        registry.clone(),
        quorum.clone(),
    ));
    Ok(Parts {
        quorum,
        metadata,
        forwarder,
        registry,
        control,
        policies,
    })
}

/// The operator's service (the HTTP management API calls it in process).
/// In cluster mode also: keep the fabric's peers equal to the metadata's
/// members and answer `ramqp-ctl` over the fabric.
fn start_admin(
    config: &BrokerConfig,
    node_id: u64,
    amqp: SocketAddr,
    parts: &Parts,
    fabric: Option<&Arc<FabricTransport>>,
) -> Arc<AdminService> {
    if let Some(fabric) = fabric {
        // Ends by itself when the node stops (it holds weak handles).
        drop(fabric.follow_members(&parts.metadata));
    }
    let admin = Arc::new(AdminService {
        node_id,
        amqp,
        queues: parts.registry.clone(),
        quorum: parts.quorum.clone(),
        metadata: parts.metadata.clone(),
        fabric: fabric.map(|f| f.clone() as Arc<dyn FabricControl>),
        control: parts.control.clone(),
        allow_fault_injection: config.cluster.allow_fault_injection,
    });
    if let Some(fabric) = fabric {
        let weak: Weak<dyn AdminHandler> = Arc::downgrade(&admin) as _;
        fabric.set_admin(weak);
    }
    admin
}
