//! [`NodeDispatcher`]: the node's one transport handler. Raft envelopes go
//! to the quorum node (or to the metadata group's), forwarding envelopes to
//! the forwarder. It routes by envelope kind and channel only.

use std::sync::Arc;

use crate::forward::Forwarder;
use crate::meta::{Metadata, META_GROUP};
use crate::net::{kind, CallFuture, Envelope, NodeHandler, NodeId};
use crate::quorum::QuorumNode;

/// The node's one transport handler: Raft envelopes go to the quorum node
/// (or the metadata group's), forwarding envelopes to the forwarder.
pub(crate) struct NodeDispatcher {
    pub(crate) quorum: Arc<QuorumNode>,
    pub(crate) metadata: Arc<Metadata>,
    pub(crate) forwarder: Arc<Forwarder>,
}

impl NodeHandler for NodeDispatcher {
    fn handle(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        match envelope.kind {
            kind::FORWARD_CALL => self.forwarder.clone().handle(from, envelope),
            kind::QUORUM_LIVENESS => self.quorum.clone().handle_liveness(from, envelope),
            _ if envelope.channel == META_GROUP => {
                let metadata = self.metadata.clone();
                Box::pin(async move { metadata.handle_rpc(envelope).await })
            }
            _ => self.quorum.clone().handle_rpc(from, envelope),
        }
    }

    fn message(&self, from: NodeId, envelope: Envelope) {
        self.forwarder.message(from, envelope);
    }
}
