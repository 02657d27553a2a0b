//! The openraft type configuration of a quorum queue's Raft group and the
//! commands its log carries.

use std::io::Cursor;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// A node of the cluster.
pub type NodeId = u64;

/// A Raft group (one per quorum queue), derived from the queue's name.
pub type GroupId = u64;

/// What a settlement does to the replicated copy of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettleKind {
    /// accepted or rejected: the message is gone.
    Remove,
    /// modified with delivery-failed: one more failed delivery attempt.
    Failed,
}

/// An entry of a quorum queue's Raft log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// A published message, the whole encoded message as received. Its
    /// message id is the index of this log entry.
    Enqueue {
        /// The encoded message.
        message: Bytes,
    },
    /// Consumers settled these messages.
    Settle {
        /// Message ids (log indexes of their enqueue entries).
        ids: Vec<u64>,
        /// What happened to them.
        kind: SettleKind,
    },
}

/// The state machine's answer to a command (the message id of an enqueue
/// is the entry's log index, returned by openraft itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied;

openraft::declare_raft_types!(
    /// The openraft types of a quorum queue.
    pub QueueRaft:
        D = Command,
        R = Applied,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<QueueRaft>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The Raft handle of one quorum queue.
pub type QueueRaftHandle = openraft::Raft<QueueRaft>;

/// The group id for a queue name: 64-bit FNV-1a, the same on every node.
pub fn group_id(queue_name: &str) -> GroupId {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in queue_name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
