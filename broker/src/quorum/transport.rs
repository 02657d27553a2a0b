//! How Raft RPCs reach other nodes: the [`RaftTransport`] trait carries
//! opaque byte payloads tagged with their group, so the quorum code does not
//! care whether the peer is in this process ([`LocalTransport`], for tests
//! and embedded clusters) or across the network (the fabric).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock, Weak};

use bytes::Bytes;

use super::types::{GroupId, NodeId};

/// Which Raft RPC a payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcKind {
    /// append-entries (also heartbeats)
    AppendEntries,
    /// request-vote
    Vote,
    /// install-snapshot (one chunk)
    InstallSnapshot,
    /// A request for the leader of the cluster-metadata group, forwarded
    /// by a node that does not lead it (see `crate::meta`).
    MetaPropose,
}

/// One RPC to a group on another node.
#[derive(Debug, Clone)]
pub struct RpcEnvelope {
    /// The group (queue) it is for.
    pub group: GroupId,
    /// The queue's name, so a node can create its replica on first contact.
    pub queue: String,
    /// Which RPC.
    pub kind: RpcKind,
    /// The serialized request.
    pub payload: Bytes,
}

/// Why an RPC did not get an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The target node is not reachable now.
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    /// The target answered with an error of its own.
    #[error("node {node}: {message}")]
    Remote {
        /// The target.
        node: NodeId,
        /// What went wrong there.
        message: String,
    },
}

/// A boxed future of an RPC answer.
pub type RpcFuture = Pin<Box<dyn Future<Output = Result<Bytes, TransportError>> + Send>>;

/// Something that answers RPCs for the groups of one node.
pub trait RpcHandler: Send + Sync + 'static {
    /// Handle one RPC; the answer is the serialized response.
    fn handle(self: Arc<Self>, from: NodeId, envelope: RpcEnvelope) -> RpcFuture;
}

/// Carries RPCs from one node to others.
pub trait RaftTransport: Send + Sync + 'static {
    /// Send `envelope` from node `from` to node `target` and await the answer.
    fn call(&self, from: NodeId, target: NodeId, envelope: RpcEnvelope) -> RpcFuture;
}

/// An in-process transport: every node of an embedded cluster registers its
/// handler here. Links between nodes can be cut to test partitions.
#[derive(Default)]
pub struct LocalTransport {
    nodes: RwLock<HashMap<NodeId, Weak<dyn RpcHandler>>>,
    cut: RwLock<HashSet<(NodeId, NodeId)>>,
}

impl LocalTransport {
    /// A transport with no nodes.
    pub fn new() -> Arc<LocalTransport> {
        Arc::new(LocalTransport::default())
    }

    /// Make node `id` reachable through `handler`.
    pub fn register(&self, id: NodeId, handler: Weak<dyn RpcHandler>) {
        self.nodes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, handler);
    }

    /// Make node `id` unreachable (it stopped).
    pub fn unregister(&self, id: NodeId) {
        self.nodes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Cut (or heal) the link between two nodes, both directions.
    pub fn set_cut(&self, a: NodeId, b: NodeId, cut: bool) {
        let mut links = self.cut.write().unwrap_or_else(|p| p.into_inner());
        if cut {
            links.insert((a, b));
            links.insert((b, a));
        } else {
            links.remove(&(a, b));
            links.remove(&(b, a));
        }
    }
}

impl RaftTransport for LocalTransport {
    fn call(&self, from: NodeId, target: NodeId, envelope: RpcEnvelope) -> RpcFuture {
        let is_cut = self
            .cut
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(from, target));
        let handler = self
            .nodes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&target)
            .and_then(Weak::upgrade);
        match handler {
            Some(handler) if !is_cut => handler.handle(from, envelope),
            _ => Box::pin(async move { Err(TransportError::Unreachable(target)) }),
        }
    }
}
