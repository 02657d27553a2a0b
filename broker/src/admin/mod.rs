//! The operator's view of a node, as exchanged with `ramqp-ctl` over the
//! fabric: the requests an operator may make (status, membership changes,
//! moving a queue's leadership, fault injection for tests) and the answers.
//! Both ends are ours, so the wire form is postcard; the CLI renders it as
//! a table or JSON.

mod fabric_control;
mod handler;
mod queue_control;
mod service;

pub use fabric_control::FabricControl;
pub use handler::AdminHandler;
pub use queue_control::{ControlFuture, QueueChange, QueueControl, QueueControlError};
pub(crate) use service::AdminService;

use serde::{Deserialize, Serialize};

/// What an operator asks a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminRequest {
    /// This node's view of the cluster and its queues.
    Status,
    /// Record a new node and make it a member of the cluster.
    AddNode {
        /// Its node id.
        id: u64,
        /// Its fabric address, `HOST:PORT`.
        fabric: String,
    },
    /// Take a node out of the cluster; its queue replicas move elsewhere.
    RemoveNode {
        /// Its node id.
        id: u64,
    },
    /// Hand the leadership of a quorum queue (or of every queue this node
    /// leads, with `queue: None`) to another node.
    MoveLeadership {
        /// The queue's address, e.g. `/quorum/orders`; `None` for all.
        queue: Option<String>,
        /// The node that should lead; `None` lets the group choose.
        to: Option<u64>,
    },
    /// Fault injection (only when the node allows it): drop all fabric
    /// traffic to and from every peer, or restore it.
    Isolate {
        /// Cut (true) or heal (false).
        isolated: bool,
    },
    /// Delete a queue (`/queues/<name>` or `/quorum/<name>`); its links are
    /// detached with amqp:resource-deleted.
    DeleteQueue {
        /// The queue's address.
        address: String,
        /// Nodes this request was passed on from (bounds the hops).
        hops: u8,
    },
    /// Drop the messages waiting in a queue (a quorum queue through its
    /// Raft log, so every replica agrees).
    PurgeQueue {
        /// The queue's address.
        address: String,
        /// Nodes this request was passed on from (bounds the hops).
        hops: u8,
    },
}

/// A node's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminResponse {
    /// For [`AdminRequest::Status`].
    Status(NodeStatus),
    /// The request was carried out; a human-readable summary.
    Done(String),
    /// The request was refused or failed; why.
    Failed(String),
}

/// One node's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The node answering.
    pub node_id: u64,
    /// Its AMQP listener.
    pub amqp: String,
    /// Every member of the cluster as this node knows it.
    pub members: Vec<MemberStatus>,
    /// The node leading the cluster metadata, if known.
    pub metadata_leader: Option<u64>,
    /// Every queue this node knows, sorted by address.
    pub queues: Vec<QueueStatus>,
}

/// A member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Node id.
    pub id: u64,
    /// Fabric address (empty for this node when it runs without a fabric).
    pub fabric: String,
    /// Whether the answering node can reach it now (always true for itself).
    pub reachable: bool,
}

/// A queue as seen by the answering node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// `/quorum/<name>` or `/queues/<name>`.
    pub address: String,
    /// The node serving it: a quorum queue's Raft leader, or the node a
    /// transient queue lives on.
    pub leader: Option<u64>,
    /// Replicas of a quorum queue (empty for a transient queue).
    pub members: Vec<u64>,
    /// Messages ready (as known on this node).
    pub ready: usize,
    /// Messages delivered and not yet settled (known on the leader only).
    pub unsettled: usize,
    /// Consumers attached through this node's leader view.
    pub consumers: usize,
    /// The last Raft log index this node applied for the queue.
    pub applied_index: Option<u64>,
    /// The Raft term this node is in for the queue (a change of leader
    /// always raises it: a benchmark compares it before and after).
    pub term: Option<u64>,
}

/// The summary of a purge of `messages` messages from `address`, as
/// [`purged_messages`] reads it back (the answer travels between nodes
/// as text).
pub(crate) fn purge_summary(address: &str, messages: usize) -> String {
    format!("purged {address} ({messages} messages)")
}

/// The count of messages a purge's summary names; `None` for a summary
/// worded otherwise (a node of another version).
pub(crate) fn purged_messages(summary: &str) -> Option<u64> {
    let (_, count) = summary.strip_prefix("purged ")?.rsplit_once(" (")?;
    count.strip_suffix(" messages)")?.parse().ok()
}

/// The fabric envelope kind of admin requests (the payload is a postcard
/// [`AdminRequest`], the answer a postcard [`AdminResponse`]).
pub const ADMIN_ENVELOPE_KIND: u32 = 0x0a00;

/// Encode a request for the wire.
pub fn encode_request(request: &AdminRequest) -> Vec<u8> {
    // Serializing these plain enums into a Vec cannot fail.
    postcard::to_allocvec(request).unwrap_or_default()
}

/// Decode an answer off the wire.
pub fn decode_response(bytes: &[u8]) -> Result<AdminResponse, postcard::Error> {
    postcard::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_purge_summary_gives_its_count_back() {
        let summary = super::purge_summary("/quorum/a (b)", 42);
        assert_eq!(summary, "purged /quorum/a (b) (42 messages)");
        assert_eq!(super::purged_messages(&summary), Some(42));
        assert_eq!(super::purged_messages("purged /queues/x"), None);
        assert_eq!(
            super::purged_messages("deleted /queues/x (3 messages)"),
            None
        );
    }
}
