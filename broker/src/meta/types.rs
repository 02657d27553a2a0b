//! The openraft type configuration of the cluster-metadata Raft group
//! ([`MetaRaft`]), its reserved group id, and the requests a node that does
//! not lead the group forwards to the one that does.

use serde::{Deserialize, Serialize};

use super::state::{MetaCommand, MetaResponse, NodeInfo};
use crate::net::NodeId;
use crate::raft::{GroupId, RESERVED_GROUP_ID};

/// The group id of the metadata group in the node's log store and on the
/// transport. `raft::group_id` never returns it, so no queue shares it.
pub const META_GROUP: GroupId = RESERVED_GROUP_ID;

/// The name the metadata group's envelopes carry in their `queue` field,
/// for logs: the group id ([`META_GROUP`]) is what routes them.
pub const META_GROUP_NAME: &str = "$meta";

openraft::declare_raft_types!(
    /// The openraft types of the cluster-metadata group.
    pub MetaRaft:
        D = MetaCommand,
        R = MetaResponse,
        NodeId = NodeId,
        Node = openraft::BasicNode,
);

/// What a node asks the metadata leader to do ([`crate::raft::RpcKind::MetaPropose`]).
/// Each is idempotent, so a request retried after a lost answer is safe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum MetaRequest {
    /// Append a command to the log and apply it.
    Write(MetaCommand),
    /// Add a node as a learner and wait until it has caught up.
    AddLearner {
        /// The node.
        id: NodeId,
        /// Where it is.
        info: NodeInfo,
    },
    /// Make a (caught-up) learner a voter.
    AddVoter {
        /// The node.
        id: NodeId,
    },
    /// Take a node out of the group's membership altogether.
    RemoveVoter {
        /// The node.
        id: NodeId,
    },
    /// Sent by a stopping leader to the voter it hands the leadership to:
    /// campaign (see `meta/handoff.rs`). Never routed to the leader.
    Campaign {
        /// The stopping leader.
        from: NodeId,
    },
}

/// The leader's answer to a [`MetaRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum MetaReply {
    /// Done: committed at log `index` (the requester waits until it has
    /// applied that far, so it reads its own write).
    Committed {
        /// Log index of the entry that did it.
        index: u64,
        /// What applying it answered (`Done` for membership changes).
        response: MetaResponse,
    },
    /// This node does not lead the group; maybe that one does.
    NotLeader(Option<NodeId>),
    /// Transient (a membership change in progress): try again.
    Retry(String),
    /// Refused for good (e.g. a membership that would be empty).
    Refused(String),
    /// The answer to [`MetaRequest::Campaign`]: who leads now.
    Elected(NodeId),
}
