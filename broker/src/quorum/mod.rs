//! Quorum queues: each `/quorum/<name>` queue is one openraft group whose
//! log lives in the node's redb store (group commit across groups). A
//! publish is `accepted` only once its entry is committed on a majority and
//! fsynced; consumers are served by the group's leader.
//!
//! Architecture invariant: this module reaches disk only through
//! `store_redb` (the log) and its own snapshot files, and other nodes only
//! through a [`crate::net::NodeTransport`]; it knows nothing of gRPC or
//! redb tables.

mod compaction;
mod handoff;
mod hold;
mod index;
pub(crate) mod network;
mod node;
mod placement;
mod queue;
mod state_machine;
mod transport;
mod types;

pub use crate::net::{
    CallFuture, Envelope, LocalTransport, NodeHandler, NodeTransport, TransportError,
};
pub use handoff::HandOff;
pub(crate) use node::cluster_members;
pub use node::{QuorumError, QuorumNode};
pub use queue::QuorumQueue;
pub use transport::RpcKind;
pub use types::{
    group_id, Applied, Command, GroupId, NodeId, QueueRaft, QueueRaftHandle, SettleKind,
    RESERVED_GROUP_ID,
};
