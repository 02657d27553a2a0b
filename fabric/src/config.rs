//! Configuration of a fabric node ([`FabricConfig`]) and of a client-only
//! connection ([`ClientConfig`]), with the defaults used in production.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::{FabricTls, NodeId};

/// Default limit on one envelope (`meta` + `payload`): 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How a node runs its side of the fabric.
#[derive(Debug, Clone)]
pub struct FabricConfig {
    /// This node's id; must not be `0` (reserved for clients).
    pub node_id: NodeId,
    /// Name of the cluster; streams from a node with another name are refused.
    pub cluster_name: String,
    /// The version of what the application puts in envelopes (its own
    /// encodings of `meta` and `payload`). Sent when a stream opens; a
    /// stream from a node of another version is refused (both sides log
    /// the two versions), so bytes are never read with the wrong decoder.
    pub wire_version: u32,
    /// Address to listen on (port 0 picks a free port, see
    /// [`crate::Fabric::local_addr`]).
    pub listen: SocketAddr,
    /// The other nodes to dial, by id.
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// Largest envelope (`meta` + `payload`) sent or accepted.
    pub max_message_bytes: usize,
    /// Limit on dialling a peer and opening its stream.
    pub connect_timeout: Duration,
    /// Limit on one call, from queueing to answer.
    pub call_timeout: Duration,
    /// Frames that may wait in one peer's outbound queue (and in one inbound
    /// stream's answer queue); a full queue makes `send` fail with
    /// [`crate::CallError::Backpressure`].
    pub send_queue: usize,
    /// First delay before dialling a peer again after a failure.
    pub reconnect_min: Duration,
    /// Cap on the (doubling) delay between dial attempts.
    pub reconnect_max: Duration,
    /// HTTP/2 keep-alive ping interval (dead peers are noticed within about
    /// this plus `keepalive_timeout`).
    pub keepalive_interval: Duration,
    /// How long an HTTP/2 keep-alive ping may go unanswered.
    pub keepalive_timeout: Duration,
    /// HTTP/2 initial stream window in bytes.
    pub stream_window: u32,
    /// HTTP/2 initial connection window in bytes.
    pub connection_window: u32,
    /// Mutual TLS with the cluster CA, for the listener and every dial;
    /// `None` is plaintext.
    pub tls: Option<FabricTls>,
}

impl FabricConfig {
    /// A configuration with the defaults and no peers.
    pub fn new(node_id: NodeId, cluster_name: impl Into<String>, listen: SocketAddr) -> Self {
        FabricConfig {
            node_id,
            cluster_name: cluster_name.into(),
            wire_version: 0,
            listen,
            peers: BTreeMap::new(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(3),
            call_timeout: Duration::from_secs(10),
            send_queue: 4096,
            reconnect_min: Duration::from_millis(20),
            reconnect_max: Duration::from_secs(1),
            keepalive_interval: Duration::from_secs(5),
            keepalive_timeout: Duration::from_secs(10),
            stream_window: 8 * 1024 * 1024,
            connection_window: 16 * 1024 * 1024,
            tls: None,
        }
    }

    /// The same configuration with `peer` added.
    pub fn with_peer(mut self, id: NodeId, addr: SocketAddr) -> Self {
        self.peers.insert(id, addr);
        self
    }

    /// The link settings for outbound streams and limits of this node.
    pub(crate) fn link(&self) -> LinkSettings {
        LinkSettings {
            node_id: self.node_id,
            cluster_name: self.cluster_name.clone(),
            wire_version: self.wire_version,
            max_message_bytes: self.max_message_bytes,
            connect_timeout: self.connect_timeout,
            call_timeout: self.call_timeout,
            send_queue: self.send_queue.max(1),
            reconnect_min: self.reconnect_min,
            reconnect_max: self.reconnect_max.max(self.reconnect_min),
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            stream_window: self.stream_window,
            connection_window: self.connection_window,
            tls: self.tls.clone().map(Arc::new),
        }
    }
}

/// How a [`crate::Client`] connects.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Address of the node to call.
    pub addr: SocketAddr,
    /// The node's cluster name (a wrong one is refused).
    pub cluster_name: String,
    /// The application's wire version (see [`FabricConfig::wire_version`]);
    /// a node of another version refuses the client.
    pub wire_version: u32,
    /// Largest envelope sent or answer accepted.
    pub max_message_bytes: usize,
    /// Limit on connecting.
    pub connect_timeout: Duration,
    /// Limit on one call.
    pub call_timeout: Duration,
    /// Outbound queue length.
    pub send_queue: usize,
    /// Mutual TLS with the cluster CA (required when the node has it).
    pub tls: Option<FabricTls>,
}

impl ClientConfig {
    /// A client configuration with the defaults.
    pub fn new(addr: SocketAddr, cluster_name: impl Into<String>) -> Self {
        ClientConfig {
            addr,
            cluster_name: cluster_name.into(),
            wire_version: 0,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(3),
            call_timeout: Duration::from_secs(30),
            send_queue: 1024,
            tls: None,
        }
    }

    /// The link settings of the client's one outbound stream.
    pub(crate) fn link(&self) -> LinkSettings {
        let mut link =
            FabricConfig::new(crate::CLIENT_NODE_ID, self.cluster_name.clone(), self.addr).link();
        link.wire_version = self.wire_version;
        link.max_message_bytes = self.max_message_bytes;
        link.connect_timeout = self.connect_timeout;
        link.call_timeout = self.call_timeout;
        link.send_queue = self.send_queue.max(1);
        link.tls = self.tls.clone().map(Arc::new);
        link
    }
}

/// What an outbound link needs to know about its own node.
#[derive(Debug, Clone)]
pub(crate) struct LinkSettings {
    pub(crate) node_id: NodeId,
    pub(crate) cluster_name: String,
    pub(crate) wire_version: u32,
    pub(crate) max_message_bytes: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) call_timeout: Duration,
    pub(crate) send_queue: usize,
    pub(crate) reconnect_min: Duration,
    pub(crate) reconnect_max: Duration,
    pub(crate) keepalive_interval: Duration,
    pub(crate) keepalive_timeout: Duration,
    pub(crate) stream_window: u32,
    pub(crate) connection_window: u32,
    pub(crate) tls: Option<Arc<FabricTls>>,
}

impl LinkSettings {
    /// The codec limit: one maximal envelope plus frame and batch headers.
    pub(crate) fn codec_limit(&self) -> usize {
        self.max_message_bytes
            .saturating_add(crate::proto::ENCODING_SLACK)
    }
}
