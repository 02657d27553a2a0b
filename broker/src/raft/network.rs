//! openraft's network traits for a Raft group, over any [`NodeTransport`]:
//! requests and responses are serialized with postcard, so the in-process
//! transport exercises the same bytes the fabric carries. Generic over the
//! type config (node ids `u64`, nodes `BasicNode`) and the snapshot data,
//! so the quorum queues' groups and the cluster-metadata group
//! (`crate::meta`) share it.
//!
//! openraft 0.10 hands a whole snapshot to the network (`full_snapshot`);
//! how it crosses in chunks is ours (`snapshot_stream.rs`). Its stream of
//! AppendEntries to a follower (`stream_append`) is pipelined when the
//! group's network allows more than one in flight (`append_stream.rs`).
//!
//! A stream to a peer whose node is known lost (a [`PeerReach`] the layer
//! above gives, its node liveness) waits for the node to be heard again,
//! for up to [`LOST_HOLD`], before it is opened. Without the wait every
//! leader retried its stream to a dead node once a second (openraft's
//! backoff tops out at 1 s), each failure a pass of the replication task
//! and of the group's core: 10,000 groups with one node down meant 10,000
//! such passes a second, on the survivors, while they elected. A waiting
//! stream counts as in flight from the entry after the peer's last match,
//! and openraft purges no log a stream has in flight: so the wait also
//! ends, as an unreachable peer, when the group records a new snapshot.
//! Else a leader purged nothing for as long as a peer was lost (up to
//! [`LOST_HOLD`] a time), and a peer that came back was sent the whole
//! log instead of the snapshot (the Proton crash test of a snapshot's
//! install saw no install at all when the peer was lost quickly).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{stream_append_sequential, RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::rt::watch::WatchReceiver;
use openraft::{BasicNode, OptionalSend, RaftTypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::AsyncRead;

use super::open_clients::{OpenClient, OpenClients};
use super::purge_gate::SnapshotIndex;
use super::snapshot_stream::{self, SnapshotChunk};
use super::{GroupId, RpcKind};
use crate::net::{Envelope, NodeId, NodeTransport, TransportError};

/// How long a stream to a peer whose node is known lost waits for it to
/// be heard again before it is tried anyway. The wait ends when the node
/// is heard; the bound is for a peer the liveness gives up while Raft's
/// calls would reach it, and for how long a stream's task outlives a
/// leadership lost meanwhile (openraft cancels a stream between two
/// requests, not in this wait). Every wait that runs out costs one failed
/// attempt: with 10 s, 10,000 groups with a node down still spent ~3% of
/// a core on those.
pub(crate) const LOST_HOLD: Duration = Duration::from_secs(30);

/// What the layer above knows of whether a peer's node can be reached.
pub(crate) trait PeerReach: Send + Sync {
    /// `None` unless `node` is known lost now; then a future that resolves
    /// when a lost peer is heard again (maybe another one: the caller
    /// then just tries).
    fn until_heard(&self, node: NodeId) -> Option<BoxFuture<'static, ()>>;
}

/// How a wait on a lost peer ended.
#[derive(Debug, PartialEq, Eq)]
enum Hold {
    /// Not lost, heard again, or the bound ran out: try the peer.
    Try,
    /// The group recorded a snapshot meanwhile: give the stream up as
    /// unreachable, untried, so openraft may purge the log it covers.
    Release,
}

/// Waits as [`PeerReach::until_heard`] says, for at most [`LOST_HOLD`],
/// or until `snapshots` (the group's snapshot index) moves.
async fn hold_while_lost(
    reach: Option<&Arc<dyn PeerReach>>,
    snapshots: Option<&SnapshotIndex>,
    target: NodeId,
) -> Hold {
    let Some(heard) = reach.and_then(|r| r.until_heard(target)) else {
        return Hold::Try;
    };
    // A clone marks the index seen now: only a snapshot recorded during
    // the wait ends it. (One recorded just before it is openraft's to
    // purge after, which the wait then holds back until the next one: a
    // dead peer delays its leader's purges by a snapshot at most.)
    let recorded = async {
        match snapshots.cloned() {
            Some(mut index) => {
                drop(index.borrow_and_update());
                if index.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(LOST_HOLD, heard) => Hold::Try,
        () = recorded => Hold::Release,
    }
}

/// Creates connections to the other members of one group, whose state
/// machine's snapshots are `SD`.
pub(crate) struct GroupNetwork<SD> {
    pub(crate) transport: Arc<dyn NodeTransport>,
    pub(crate) node_id: NodeId,
    pub(crate) group: GroupId,
    pub(crate) queue: String,
    /// Bytes of one snapshot chunk.
    pub(crate) snapshot_chunk_bytes: usize,
    /// AppendEntries in flight to one follower at most; 1: one at a time
    /// (openraft's sequential stream; the follower must take
    /// `RpcKind::AppendStream` for more).
    pub(crate) append_depth: usize,
    /// Whether a peer's node is known lost (none: every stream is tried).
    pub(crate) reach: Option<Arc<dyn PeerReach>>,
    /// The group's snapshot index: a new snapshot ends a wait on a lost
    /// peer (the module docs say why).
    pub(crate) snapshots: Option<SnapshotIndex>,
    /// The node's count of open peer connections (`open_clients.rs`).
    pub(crate) clients: OpenClients,
    pub(crate) _snapshot: PhantomData<fn() -> SD>,
}

impl<SD> GroupNetwork<SD> {
    /// The network of `group` (named `queue` in envelopes) on `node_id`.
    pub(crate) fn new(
        transport: Arc<dyn NodeTransport>,
        node_id: NodeId,
        group: GroupId,
        queue: String,
        snapshot_chunk_bytes: usize,
        append_depth: usize,
    ) -> Self {
        GroupNetwork {
            transport,
            node_id,
            group,
            queue,
            snapshot_chunk_bytes,
            append_depth,
            reach: None,
            snapshots: None,
            clients: OpenClients::default(),
            _snapshot: PhantomData,
        }
    }

    /// Counts its connections in the node's `clients`.
    pub(crate) fn with_clients(mut self, clients: OpenClients) -> Self {
        self.clients = clients;
        self
    }

    /// Streams to a peer whose node `reach` knows lost wait for it, or
    /// for the group's next snapshot (`snapshots`).
    pub(crate) fn with_reach(
        mut self,
        reach: Arc<dyn PeerReach>,
        snapshots: SnapshotIndex,
    ) -> Self {
        self.reach = Some(reach);
        self.snapshots = Some(snapshots);
        self
    }
}

/// One group's connection to one peer.
pub(crate) struct GroupConnection<SD> {
    pub(super) transport: Arc<dyn NodeTransport>,
    pub(super) node_id: NodeId,
    pub(super) target: NodeId,
    pub(super) group: GroupId,
    pub(super) queue: String,
    snapshot_chunk_bytes: usize,
    append_depth: usize,
    reach: Option<Arc<dyn PeerReach>>,
    snapshots: Option<SnapshotIndex>,
    _open: OpenClient,
    _snapshot: PhantomData<fn() -> SD>,
}

impl<C, SD> RaftNetworkFactory<C> for GroupNetwork<SD>
where
    C: RaftTypeConfig<NodeId = NodeId, Node = BasicNode>,
    SD: AsyncRead + Unpin + OptionalSend + 'static,
{
    type Network = GroupConnection<SD>;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> GroupConnection<SD> {
        self.transport.learn_peer(target, &node.addr);
        GroupConnection {
            transport: self.transport.clone(),
            node_id: self.node_id,
            target,
            group: self.group,
            queue: self.queue.clone(),
            snapshot_chunk_bytes: self.snapshot_chunk_bytes,
            append_depth: self.append_depth,
            reach: self.reach.clone(),
            snapshots: self.snapshots.clone(),
            _open: self.clients.open(),
            _snapshot: PhantomData,
        }
    }
}

/// A failed call as openraft takes it: unreachable, or a network error.
pub(super) fn transport_error<C: RaftTypeConfig>(e: TransportError) -> RPCError<C> {
    match e {
        TransportError::Unreachable(_) => CallError::Unreachable(e),
        TransportError::Backpressure(_) | TransportError::Remote { .. } => {
            CallError::Network(e.to_string())
        }
    }
    .into_rpc()
}

/// One item of a stream of AppendEntries answers.
type StreamItem<C> = Result<StreamAppendResult<C>, RPCError<C>>;

/// Why a call failed before a reply was decoded.
enum CallError {
    Unreachable(TransportError),
    Network(String),
}

impl CallError {
    fn into_rpc<C: RaftTypeConfig>(self) -> RPCError<C> {
        match self {
            CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Network(m) => RPCError::Network(NetworkError::from_string(m)),
        }
    }

    fn into_streaming<C: RaftTypeConfig>(self) -> StreamingError<C> {
        match self {
            CallError::Unreachable(e) => StreamingError::Unreachable(Unreachable::new(&e)),
            CallError::Network(m) => StreamingError::Network(NetworkError::from_string(m)),
        }
    }
}

impl<SD> GroupConnection<SD> {
    /// One call: `request` out, the decoded reply back.
    async fn call<Req, Resp>(&self, kind: RpcKind, request: &Req) -> Result<Resp, CallError>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
    {
        let payload =
            postcard::to_allocvec(request).map_err(|e| CallError::Network(e.to_string()))?;
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
                TransportError::Unreachable(_) => CallError::Unreachable(e),
                TransportError::Backpressure(_) | TransportError::Remote { .. } => {
                    CallError::Network(e.to_string())
                }
            })?;
        postcard::from_bytes(&reply).map_err(|e| CallError::Network(e.to_string()))
    }

    /// A call whose reply is the peer's `Result<_, RaftError>`: a remote
    /// error (its group stopped) is a network failure to openraft, which
    /// retries, as it does when the peer cannot be reached.
    pub(super) async fn raft_call<C, Req, Resp>(
        &self,
        kind: RpcKind,
        request: &Req,
    ) -> Result<Resp, RPCError<C>>
    where
        C: RaftTypeConfig,
        Req: Serialize,
        Resp: DeserializeOwned,
    {
        let reply: Result<Resp, RaftError<C>> = self
            .call(kind, request)
            .await
            .map_err(CallError::into_rpc)?;
        reply.map_err(|e| {
            RPCError::Network(NetworkError::from_string(format!(
                "node {}: {e}",
                self.target
            )))
        })
    }
}

impl<C, SD> RaftNetworkV2<C> for GroupConnection<SD>
where
    C: RaftTypeConfig<NodeId = NodeId, Node = BasicNode>,
    SD: AsyncRead + Unpin + OptionalSend + 'static,
{
    type SnapshotData = SD;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<C>, RPCError<C>> {
        self.raft_call(RpcKind::AppendEntries, &rpc).await
    }

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, StreamItem<C>>, RPCError<C>>>
    where
        S: Stream<Item = AppendEntriesRequest<C>> + OptionalSend + Unpin + 'static,
    {
        Box::pin(async move {
            let hold = hold_while_lost(self.reach.as_ref(), self.snapshots.as_ref(), self.target);
            if hold.await == Hold::Release {
                let lost = TransportError::Unreachable(self.target);
                return Err(transport_error(lost));
            }
            if self.append_depth <= 1 {
                return stream_append_sequential(self, input, option).await;
            }
            let depth = self.append_depth;
            let this: &'s GroupConnection<SD> = self;
            Ok(super::append_stream::pipelined(this, input, depth))
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<C>,
        _option: RPCOption,
    ) -> Result<VoteResponse<C>, RPCError<C>> {
        self.raft_call(RpcKind::Vote, &rpc).await
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<C>,
        _option: RPCOption,
    ) -> Result<TransferLeaderResponse<C>, RPCError<C>> {
        self.raft_call(RpcKind::TransferLeader, &req).await
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<C>,
        snapshot: SnapshotOf<C, SD>,
        cancel: impl std::future::Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<C>, StreamingError<C>> {
        let send = async {
            let meta = snapshot.meta;
            let mut data = snapshot.snapshot;
            let mut offset = 0u64;
            let mut buf = vec![0u8; self.snapshot_chunk_bytes.max(1)];
            loop {
                let n = snapshot_stream::read_chunk(&mut data, &mut buf)
                    .await
                    .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
                let done = n < buf.len();
                let chunk = SnapshotChunk::<C> {
                    vote: vote.clone(),
                    meta: meta.clone(),
                    offset,
                    data: buf[..n].to_vec(),
                    done,
                };
                let reply: Result<Option<SnapshotResponse<C>>, String> = self
                    .call(RpcKind::InstallSnapshot, &chunk)
                    .await
                    .map_err(CallError::into_streaming)?;
                match reply {
                    Err(message) => {
                        return Err(StreamingError::Network(NetworkError::from_string(format!(
                            "node {}: {message}",
                            self.target
                        ))))
                    }
                    Ok(Some(response)) => return Ok(response),
                    Ok(None) if done => {
                        return Err(StreamingError::Network(NetworkError::from_string(
                            "no answer to the last snapshot chunk",
                        )))
                    }
                    Ok(None) => offset += n as u64,
                }
            }
        };
        tokio::select! {
            result = send => result,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}
