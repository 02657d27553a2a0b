//! The Raft RPC kinds as they appear in a [`crate::net::Envelope`]: the
//! envelope's channel is the group id, its meta the queue's name (so a node
//! can create its replica on first contact), its payload the postcard
//! request.

use crate::net::kind;

/// Which Raft RPC a payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcKind {
    /// append-entries (also heartbeats)
    AppendEntries,
    /// append-entries of a pipelined stream (`append_stream.rs`)
    AppendStream,
    /// request-vote
    Vote,
    /// install-snapshot (one chunk, `snapshot_stream.rs`)
    InstallSnapshot,
    /// transfer-leader
    TransferLeader,
    /// A request for the leader of the cluster-metadata group, forwarded
    /// by a node that does not lead it (see `crate::meta`).
    MetaPropose,
}

impl RpcKind {
    /// The envelope kind.
    pub fn code(self) -> u32 {
        match self {
            RpcKind::AppendEntries => kind::RAFT_APPEND_ENTRIES,
            RpcKind::AppendStream => kind::RAFT_APPEND_STREAM,
            RpcKind::Vote => kind::RAFT_VOTE,
            RpcKind::InstallSnapshot => kind::RAFT_INSTALL_SNAPSHOT,
            RpcKind::TransferLeader => kind::RAFT_TRANSFER_LEADER,
            RpcKind::MetaPropose => kind::META_PROPOSE,
        }
    }

    /// The Raft RPC of an envelope kind, if it is one.
    pub fn from_code(code: u32) -> Option<RpcKind> {
        match code {
            kind::RAFT_APPEND_ENTRIES => Some(RpcKind::AppendEntries),
            kind::RAFT_APPEND_STREAM => Some(RpcKind::AppendStream),
            kind::RAFT_VOTE => Some(RpcKind::Vote),
            kind::RAFT_INSTALL_SNAPSHOT => Some(RpcKind::InstallSnapshot),
            kind::RAFT_TRANSFER_LEADER => Some(RpcKind::TransferLeader),
            kind::META_PROPOSE => Some(RpcKind::MetaPropose),
            _ => None,
        }
    }
}
