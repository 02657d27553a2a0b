//! openraft's network traits for a Raft group, over any [`NodeTransport`]:
//! requests and responses are serialized with postcard, so the in-process
//! transport exercises the same bytes the fabric carries. Generic over the
//! type config (node ids `u64`, nodes `BasicNode`), so the quorum queues'
//! groups and the cluster-metadata group (`crate::meta`) share it.

use std::sync::Arc;

use bytes::Bytes;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftTypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{GroupId, RpcKind};
use crate::net::{Envelope, NodeId, NodeTransport, TransportError};

/// Creates connections to the other members of one group.
pub(crate) struct GroupNetwork {
    pub(crate) transport: Arc<dyn NodeTransport>,
    pub(crate) node_id: NodeId,
    pub(crate) group: GroupId,
    pub(crate) queue: String,
}

/// One group's connection to one peer.
pub(crate) struct GroupConnection {
    transport: Arc<dyn NodeTransport>,
    node_id: NodeId,
    target: NodeId,
    group: GroupId,
    queue: String,
}

impl<C> RaftNetworkFactory<C> for GroupNetwork
where
    C: RaftTypeConfig<NodeId = NodeId, Node = BasicNode>,
{
    type Network = GroupConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> GroupConnection {
        self.transport.learn_peer(target, &node.addr);
        GroupConnection {
            transport: self.transport.clone(),
            node_id: self.node_id,
            target,
            group: self.group,
            queue: self.queue.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct CodecFailure(String);

impl GroupConnection {
    async fn call<Req, Resp, E>(
        &self,
        kind: RpcKind,
        request: &Req,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload = postcard::to_allocvec(request)
            .map_err(|e| RPCError::Network(NetworkError::new(&CodecFailure(e.to_string()))))?;
        let envelope = Envelope {
            channel: self.group,
            kind: kind.code(),
            meta: Bytes::copy_from_slice(self.queue.as_bytes()),
            payload: Bytes::from(payload),
        };
        let reply = self
            .transport
            .call(self.node_id, self.target, envelope)
            .await
            .map_err(|e| match e {
                TransportError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&e)),
                TransportError::Backpressure(_) | TransportError::Remote { .. } => {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        let result: Result<Resp, RaftError<NodeId, E>> = postcard::from_bytes(&reply)
            .map_err(|e| RPCError::Network(NetworkError::new(&CodecFailure(e.to_string()))))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl<C> RaftNetwork<C> for GroupConnection
where
    C: RaftTypeConfig<NodeId = NodeId, Node = BasicNode>,
{
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RpcKind::AppendEntries, &rpc).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(RpcKind::InstallSnapshot, &rpc).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RpcKind::Vote, &rpc).await
    }
}
