//! [`FabricTransport`]: the node transport between processes, over the
//! gRPC fabric (one HTTP/2 stream per peer, batched). It maps the broker's
//! [`Envelope`]s one to one onto the fabric's and relays what arrives to the
//! node's registered [`NodeHandler`]; operator requests (`ramqp-ctl`) are
//! relayed to the node's [`AdminHandler`]. It keeps the fabric's peers equal
//! to the cluster's members as the metadata records them.
//!
//! It lives in the node assembly because it joins three things below it:
//! the transport primitives (`crate::net`), the operator's service
//! (`crate::admin`) and the cluster metadata (`crate::meta`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;

use crate::admin::{AdminHandler, FabricControl, ADMIN_ENVELOPE_KIND};
use crate::meta::{Metadata, NodeInfo};
use crate::net::{CallFuture, Envelope, NodeHandler, NodeId, NodeTransport, TransportError};

/// Where arriving traffic goes: set once the node's handlers exist.
#[derive(Default)]
struct Relay {
    node: RwLock<Option<Weak<dyn NodeHandler>>>,
    admin: RwLock<Option<Weak<dyn AdminHandler>>>,
}

impl Relay {
    fn node(&self) -> Option<Arc<dyn NodeHandler>> {
        read(&self.node).as_ref().and_then(Weak::upgrade)
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

fn to_fabric(envelope: Envelope) -> fabric::Envelope {
    fabric::Envelope {
        channel: envelope.channel,
        kind: envelope.kind,
        meta: envelope.meta,
        payload: envelope.payload,
    }
}

fn from_fabric(envelope: fabric::Envelope) -> Envelope {
    Envelope {
        channel: envelope.channel,
        kind: envelope.kind,
        meta: envelope.meta,
        payload: envelope.payload,
    }
}

impl fabric::Handler for Relay {
    fn call(
        self: Arc<Self>,
        from: fabric::NodeId,
        envelope: fabric::Envelope,
    ) -> fabric::BoxFuture<'static, Result<Bytes, String>> {
        if envelope.kind == ADMIN_ENVELOPE_KIND {
            let admin = read(&self.admin).as_ref().and_then(Weak::upgrade);
            return Box::pin(async move {
                match admin {
                    Some(admin) => Ok(admin.admin(envelope.payload).await),
                    None => Err("this node is starting or stopping".to_owned()),
                }
            });
        }
        if from == fabric::CLIENT_NODE_ID {
            // A client-only connection may ask the operator's questions,
            // never speak Raft or forward links.
            return Box::pin(async { Err("clients may only send admin requests".to_owned()) });
        }
        match self.node() {
            Some(node) => {
                let answer = node.handle(from, from_fabric(envelope));
                Box::pin(async move { answer.await.map_err(|e| e.to_string()) })
            }
            None => Box::pin(async { Err("this node is starting or stopping".to_owned()) }),
        }
    }

    fn message(&self, from: fabric::NodeId, envelope: fabric::Envelope) {
        if from == fabric::CLIENT_NODE_ID {
            return;
        }
        if let Some(node) = self.node() {
            node.message(from, from_fabric(envelope));
        }
    }
}

/// The fabric settings the broker uses.
#[derive(Debug, Clone)]
pub(crate) struct FabricSettings {
    /// This node.
    pub(crate) node_id: NodeId,
    /// Shared by every node of the cluster.
    pub(crate) cluster_name: String,
    /// The fabric listener.
    pub(crate) listen: SocketAddr,
    /// The other nodes.
    pub(crate) peers: BTreeMap<NodeId, SocketAddr>,
    /// Largest envelope.
    pub(crate) max_message_bytes: usize,
    /// Limit on one call.
    pub(crate) call_timeout: Duration,
    /// Mutual TLS with the cluster CA; `None`: plaintext.
    pub(crate) tls: Option<fabric::FabricTls>,
}

/// The node transport over the fabric.
pub(crate) struct FabricTransport {
    fabric: RwLock<Option<Arc<fabric::Fabric>>>,
    relay: Arc<Relay>,
    node_id: NodeId,
    local_addr: SocketAddr,
}

/// Frames one peer's outbound queue holds. Forwarded link traffic is
/// bounded by link credit and the publish window, but many links share a
/// peer, so this is well above one link's credit.
const SEND_QUEUE: usize = 65_536;

impl FabricTransport {
    /// Bind the fabric listener and start dialling the peers.
    pub(crate) async fn start(
        settings: FabricSettings,
    ) -> Result<Arc<FabricTransport>, fabric::FabricError> {
        let mut config = fabric::FabricConfig::new(
            settings.node_id,
            settings.cluster_name.clone(),
            settings.listen,
        );
        config.wire_version = crate::net::WIRE_VERSION;
        config.peers = settings.peers;
        config.max_message_bytes = settings.max_message_bytes;
        config.call_timeout = settings.call_timeout;
        config.send_queue = SEND_QUEUE;
        config.tls = settings.tls;
        let relay = Arc::new(Relay::default());
        let handler: Arc<dyn fabric::Handler> = relay.clone();
        let fabric = fabric::Fabric::start(config, handler).await?;
        Ok(Arc::new(FabricTransport {
            local_addr: fabric.local_addr(),
            fabric: RwLock::new(Some(Arc::new(fabric))),
            relay,
            node_id: settings.node_id,
        }))
    }

    /// The address the fabric listens on.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn fabric(&self) -> Option<Arc<fabric::Fabric>> {
        read(&self.fabric).clone()
    }

    /// The fabric's traffic counters (zero once it is shut down).
    pub(crate) fn stats(&self) -> fabric::FabricStats {
        self.fabric().map(|f| f.stats()).unwrap_or_default()
    }

    /// Route operator requests to `handler`.
    pub(crate) fn set_admin(&self, handler: Weak<dyn AdminHandler>) {
        *write(&self.relay.admin) = Some(handler);
    }

    /// The peers and whether each is connected now.
    pub(crate) fn peers(&self) -> Vec<(NodeId, SocketAddr, bool)> {
        let Some(fabric) = self.fabric() else {
            return Vec::new();
        };
        fabric
            .peers()
            .into_iter()
            .map(|(id, addr)| (id, addr, fabric.is_connected(id) && !fabric.is_blocked(id)))
            .collect()
    }

    /// Start dialling a new peer.
    pub(crate) fn add_peer(&self, id: NodeId, addr: SocketAddr) {
        if let Some(fabric) = self.fabric() {
            fabric.add_peer(id, addr);
        }
    }

    /// Fault injection: cut (or heal) every peer.
    pub(crate) fn set_isolated(&self, isolated: bool) {
        if let Some(fabric) = self.fabric() {
            for id in fabric.peers().into_keys() {
                fabric.set_blocked(id, isolated);
            }
        }
    }

    /// Close every stream and the listener.
    pub(crate) async fn shutdown(&self) {
        let fabric = write(&self.fabric).take();
        if let Some(fabric) = fabric {
            match Arc::try_unwrap(fabric) {
                Ok(fabric) => fabric.shutdown().await,
                Err(_) => tracing::debug!("fabric still referenced at shutdown; dropped later"),
            }
        }
    }
}

fn map_error(target: NodeId, error: fabric::CallError) -> TransportError {
    match error {
        fabric::CallError::Unreachable(_)
        | fabric::CallError::Closed
        | fabric::CallError::Timeout => TransportError::Unreachable(target),
        fabric::CallError::Backpressure => TransportError::Backpressure(target),
        other => TransportError::Remote {
            node: target,
            message: other.to_string(),
        },
    }
}

impl NodeTransport for FabricTransport {
    fn call(&self, from: NodeId, target: NodeId, envelope: Envelope) -> CallFuture {
        debug_assert_eq!(from, self.node_id);
        let Some(fabric) = self.fabric() else {
            return Box::pin(async move { Err(TransportError::Unreachable(target)) });
        };
        let answer = fabric.call(target, to_fabric(envelope));
        Box::pin(async move { answer.await.map_err(|e| map_error(target, e)) })
    }

    fn not_listening_since(&self, from: NodeId, target: NodeId) -> Option<tokio::time::Instant> {
        debug_assert_eq!(from, self.node_id);
        self.fabric().and_then(|f| f.not_listening_since(target))
    }

    fn send(&self, from: NodeId, target: NodeId, envelope: Envelope) -> Result<(), TransportError> {
        debug_assert_eq!(from, self.node_id);
        let Some(fabric) = self.fabric() else {
            return Err(TransportError::Unreachable(target));
        };
        fabric
            .send(target, to_fabric(envelope))
            .map_err(|e| map_error(target, e))
    }

    fn register(&self, node: NodeId, handler: Weak<dyn NodeHandler>) {
        if node == self.node_id {
            *write(&self.relay.node) = Some(handler);
        }
    }

    fn unregister(&self, node: NodeId) {
        if node == self.node_id {
            *write(&self.relay.node) = None;
        }
    }

    fn learn_peer(&self, node: NodeId, addr: &str) {
        let Some(fabric) = self.fabric() else {
            return;
        };
        if node == self.node_id || addr.is_empty() || fabric.peers().contains_key(&node) {
            return;
        }
        match addr.parse() {
            Ok(addr) => {
                tracing::info!(node, %addr, "fabric: new peer from a Raft membership");
                fabric.add_peer(node, addr);
            }
            Err(e) => tracing::warn!(node, addr, error = %e, "fabric: bad peer address"),
        }
    }
}

impl FabricTransport {
    /// Keep the fabric's peers equal to the cluster's members as the
    /// metadata records them: a node added or removed anywhere is dialled
    /// or dropped here, without a restart.
    pub(crate) fn follow_members(
        self: &Arc<Self>,
        metadata: &Arc<Metadata>,
    ) -> tokio::task::JoinHandle<()> {
        let transport = Arc::downgrade(self);
        let metadata = Arc::downgrade(metadata);
        let mut changes = match metadata.upgrade() {
            Some(m) => m.changes(),
            None => return tokio::spawn(async {}),
        };
        tokio::spawn(async move {
            loop {
                let (Some(transport), Some(metadata)) = (transport.upgrade(), metadata.upgrade())
                else {
                    return;
                };
                transport.sync_peers(&metadata.members());
                drop((transport, metadata));
                if changes.changed().await.is_err() {
                    return;
                }
            }
        })
    }

    fn sync_peers(&self, members: &BTreeMap<NodeId, NodeInfo>) {
        let Some(fabric) = self.fabric() else {
            return;
        };
        // Before the first membership is applied the list is empty: keep
        // the configured peers.
        if members.is_empty() {
            return;
        }
        let known = fabric.peers();
        for (id, info) in members {
            if *id == self.node_id || known.contains_key(id) {
                continue;
            }
            if let Ok(addr) = info.fabric.parse() {
                tracing::info!(node = id, %addr, "fabric: dialling a new member");
                fabric.add_peer(*id, addr);
            }
        }
        for id in known.keys() {
            if !members.contains_key(id) {
                tracing::info!(node = id, "fabric: dropping a removed member");
                fabric.remove_peer(*id);
            }
        }
    }
}

impl FabricControl for FabricTransport {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn peers(&self) -> Vec<(NodeId, SocketAddr, bool)> {
        FabricTransport::peers(self)
    }

    fn add_peer(&self, id: NodeId, addr: SocketAddr) {
        FabricTransport::add_peer(self, id, addr)
    }

    fn set_isolated(&self, isolated: bool) {
        FabricTransport::set_isolated(self, isolated)
    }
}
