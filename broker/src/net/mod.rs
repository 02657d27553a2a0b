//! Node-to-node transport: the one interface every inter-node byte goes
//! through, Raft RPCs and forwarded client traffic alike. It has exactly
//! the two primitives the gRPC fabric offers, so an adapter can plug the
//! fabric in without the broker changing:
//!
//! - [`NodeTransport::call`]: request/response, concurrent; answers come
//!   back in any order, but the target's [`NodeHandler::handle`] (its
//!   synchronous part, before the returned future runs) is invoked in the
//!   order the calls were made, per (from, target), unless the transport's
//!   queue to the target is full;
//! - [`NodeTransport::send`]: one-way, ordered per (from, target) pair,
//!   never blocks, may fail (backpressure, unreachable).
//!
//! Each node registers one [`NodeHandler`] (the broker's node dispatcher),
//! which receives both kinds and routes them by [`Envelope::kind`].

mod local;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use bytes::Bytes;

pub use local::LocalTransport;

/// A node of the cluster.
pub type NodeId = u64;

/// What travels between nodes: the fabric's envelope. `meta` is a small
/// postcard-encoded header; `payload` carries bulk bytes (a Raft request,
/// or a message exactly as the client sent it, never re-encoded).
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// Raft: the group id. Forwarding: the link id (so an adapter could
    /// spread links over streams without reordering one link).
    pub channel: u64,
    /// One of [`kind`].
    pub kind: u32,
    /// Small header (Raft: the queue name; forwarding: a postcard message).
    pub meta: Bytes,
    /// Bulk bytes.
    pub payload: Bytes,
}

/// The version of everything this broker puts in envelopes: the postcard
/// encodings of openraft's RPCs (which follow openraft's types), of the
/// metadata proposals, of forwarding and of `ramqp-ctl`'s admin requests.
/// The fabric sends it when a stream opens and refuses a node of another
/// version with a message naming both (`docs/versioning.md`), so a node
/// never decodes a peer's Raft RPC with the wrong layout.
///
/// Raise it with any change to those encodings or to their kinds below.
/// History: 1 = openraft 0.9 RPCs, forward protocol 1, admin protocol 1;
/// 2 = the quorum log's `Command::Purge` (in append-entries) and the admin
/// requests `DeleteQueue` / `PurgeQueue`; 3 = the quorum log's
/// `Command::Transact` and the forwarding request `ToServer::Commit`
/// (local transactions); 4 = openraft 0.10's RPCs (append-entries and
/// vote re-encoded, install-snapshot as our own chunks, transfer-leader
/// added): a 0.1 node and a 0.2 node refuse each other; 5 = the quorum
/// nodes' liveness probe ([`kind::QUORUM_LIVENESS`]), which quiet groups
/// rely on; 6 = pipelined append-entries ([`kind::RAFT_APPEND_STREAM`]: a
/// stream header before the request, openraft's stream result as the
/// answer).
pub const WIRE_VERSION: u32 = 6;

/// The envelope kinds. Raft kinds travel by `call`; forwarding uses both.
pub mod kind {
    /// Raft append-entries (also heartbeats), by `call`.
    pub const RAFT_APPEND_ENTRIES: u32 = 1;
    /// Raft request-vote, by `call`.
    pub const RAFT_VOTE: u32 = 2;
    /// Raft install-snapshot (one chunk), by `call`.
    pub const RAFT_INSTALL_SNAPSHOT: u32 = 3;
    /// A change for the cluster-metadata group's leader, forwarded by a
    /// node that does not lead it (see `crate::meta`), by `call`.
    pub const META_PROPOSE: u32 = 4;
    /// Raft transfer-leader (openraft 0.10: the leader tells every voter
    /// which one is to take over), by `call`.
    pub const RAFT_TRANSFER_LEADER: u32 = 5;
    /// A quorum node's liveness probe of a peer (`quorum/peer_liveness.rs`),
    /// by `call`.
    pub const QUORUM_LIVENESS: u32 = 6;
    /// Raft append-entries of a pipelined stream (`raft/append_stream.rs`),
    /// by `call`: the target takes the calls of one stream in the order
    /// they were made.
    pub const RAFT_APPEND_STREAM: u32 = 7;
    /// Forwarding control requests (locate a leader, probe links, audit
    /// liveness), by `call`.
    pub const FORWARD_CALL: u32 = 16;
    /// Forwarded link traffic from a client's node to the serving node
    /// (publish, subscribe, flow, settle, ...), by ordered `send`.
    pub const FORWARD_TO_SERVER: u32 = 17;
    /// Link traffic back to the client's node (deliveries, drained,
    /// publish outcomes, link closed), by ordered `send`.
    pub const FORWARD_TO_ORIGIN: u32 = 18;
}

/// Why a call or send failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The target node is not reachable now.
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    /// The ordered stream to the target is full; try later.
    #[error("node {0}: send queue full")]
    Backpressure(NodeId),
    /// The target answered with an error of its own.
    #[error("node {node}: {message}")]
    Remote {
        /// The target.
        node: NodeId,
        /// What went wrong there.
        message: String,
    },
}

/// A boxed future of a call's answer.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Bytes, TransportError>> + Send>>;

/// The receiving side of one node.
pub trait NodeHandler: Send + Sync + 'static {
    /// Answer one `call`. Invoked in the order `from` made its calls (see
    /// the module's header), so what it does before returning the future
    /// is ordered; like `message`, that part must not block.
    fn handle(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture;
    /// Take one `send`, in the order `from` sent them. Must not block: it
    /// may only take short locks and hand work to channels.
    fn message(&self, from: NodeId, envelope: Envelope);
}

/// Carries envelopes from one node to others.
pub trait NodeTransport: Send + Sync + 'static {
    /// Send `envelope` from `from` to `target` and await the answer.
    fn call(&self, from: NodeId, target: NodeId, envelope: Envelope) -> CallFuture;
    /// Send one-way, ordered per (from, target); never blocks.
    fn send(&self, from: NodeId, target: NodeId, envelope: Envelope) -> Result<(), TransportError>;
    /// Make `node` reachable through `handler` (held weakly: a stopped
    /// node's handler is dropped with it).
    fn register(&self, node: NodeId, handler: Weak<dyn NodeHandler>);
    /// Make `node` unreachable (it stopped).
    fn unregister(&self, node: NodeId);
    /// Since when `target`, seen from `from`, is known to be not running:
    /// nothing listens at its address (the fabric's last dial was
    /// refused, at that moment; in process, it was unregistered then). A
    /// node that is slow, cut off or partitioned is not this. Node-level
    /// liveness takes it as the node's loss at once, unless it heard the
    /// node after that moment (`quorum/peer_liveness.rs`).
    fn not_listening_since(&self, from: NodeId, target: NodeId) -> Option<tokio::time::Instant> {
        let _ = (from, target);
        None
    }
    /// A Raft membership names `node` at `addr` (e.g. a learner being
    /// added): start reaching it there if it is not known yet. In-process
    /// transports know every node already.
    fn learn_peer(&self, node: NodeId, addr: &str) {
        let _ = (node, addr);
    }
}
