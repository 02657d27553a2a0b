//! The Raft RPCs a [`QuorumNode`] answers for its groups: each opens (or
//! creates) the replica it is for, then hands the request to the group's
//! `Raft`. Pipelined appends (`RpcKind::AppendStream`) are taken in the
//! order the leader made them, before the returned future runs, and fed to
//! the group through the node's [`crate::raft::append_feed`] feeds.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use serde::Serialize;

use super::node::QuorumNode;
use super::queue::QuorumQueue;
use super::types::QueueRaft;
use crate::net::{kind, CallFuture, Envelope, NodeId, TransportError};
use crate::queue::QueueAddress;
use crate::raft::append_feed::{FeedOpener, FeedTarget};
use crate::raft::append_stream::{split_request, StreamAnswer};
use crate::raft::{group_id, RpcKind};

fn encode<T: Serialize>(value: &T) -> Result<Bytes, String> {
    postcard::to_allocvec(value)
        .map(Bytes::from)
        .map_err(|e| format!("cannot encode reply: {e}"))
}

/// The queue name of a Raft envelope, checked against its group id.
fn queue_name(envelope: &Envelope) -> Result<&str, String> {
    let name =
        std::str::from_utf8(&envelope.meta).map_err(|_| "queue name is not UTF-8".to_owned())?;
    if group_id(name) != envelope.channel {
        return Err(format!("group id does not match queue {name}"));
    }
    Ok(name)
}

impl QuorumNode {
    /// Answer one Raft RPC envelope from node `from` (routed here by the
    /// node dispatcher, in the order `from` made its calls).
    pub fn handle_rpc(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        if envelope.kind == kind::RAFT_APPEND_STREAM {
            return self.take_append(from, envelope);
        }
        Box::pin(self.serve_rpc(envelope))
    }

    fn remote(&self, message: String) -> TransportError {
        TransportError::Remote {
            node: self.node_id,
            message,
        }
    }

    /// This node's replica of queue `name`, opened (or created) for a
    /// Raft RPC of its group.
    async fn replica_for(&self, name: &str) -> Result<Arc<QuorumQueue>, String> {
        let address = QueueAddress::parse(&format!("/quorum/{name}")).map_err(|e| e.to_string())?;
        if self.get(&address).is_none() && self.declaration(name) == Some(false) {
            // Not a replica this node has, nor one the metadata declares
            // (deleted, or not applied here yet: the sender retries). A
            // replica left over from a deleted queue must not make fresh
            // replicas here to win votes with.
            return Err(format!("{address} is not declared here"));
        }
        self.ensure_open(name, None)
            .await
            .map_err(|e| e.to_string())
    }

    /// A pipelined append: queued to the group's feed now (in call order),
    /// answered when openraft has taken it.
    fn take_append(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        let taken = (|| {
            let name = queue_name(&envelope)?.to_owned();
            let (header, request) =
                split_request(&envelope.payload).map_err(|e| format!("bad request: {e}"))?;
            let node = self.clone();
            let open = move || -> FeedOpener<QueueRaft> {
                Box::new(move |input| {
                    Box::pin(async move {
                        let queue = node.replica_for(&name).await?;
                        let answers = queue.raft.stream_append(input).boxed();
                        Ok(FeedTarget {
                            answers,
                            // Taken: the sender leads this replica, and is
                            // alive (see `leader_contact.rs`).
                            on_taken: Box::new(move || queue.note_leader_contact(from)),
                        })
                    })
                })
            };
            self.append_feeds
                .take(envelope.channel, from, header, request, open)
        })();
        Box::pin(async move {
            let answer: StreamAnswer<QueueRaft> = match taken {
                Ok(answer) => answer
                    .await
                    .unwrap_or_else(|_| Err("the follower's feed stopped".to_owned())),
                Err(why) => Err(why),
            };
            encode(&answer).map_err(|e| self.remote(e))
        })
    }

    async fn serve_rpc(self: Arc<Self>, envelope: Envelope) -> Result<Bytes, TransportError> {
        let remote = |message: String| self.remote(message);
        let name = queue_name(&envelope).map_err(remote)?;
        let Some(kind) = RpcKind::from_code(envelope.kind) else {
            return Err(remote(format!("not a Raft RPC: kind {}", envelope.kind)));
        };
        let queue = self.replica_for(name).await.map_err(remote)?;
        let raft = &queue.raft;
        let payload = &envelope.payload;
        let decode = |e: postcard::Error| remote(format!("bad request: {e}"));
        let reply = match kind {
            RpcKind::AppendEntries => {
                let request: openraft::raft::AppendEntriesRequest<QueueRaft> =
                    postcard::from_bytes(payload).map_err(decode)?;
                let leader = request.vote.leader_id().node_id;
                let response = raft.append_entries(request).await;
                // Taken (not refused for a higher vote): the sender leads
                // this replica, and is alive (see `leader_contact.rs`).
                use openraft::raft::AppendEntriesResponse::HigherVote;
                if matches!(&response, Ok(r) if !matches!(r, HigherVote(_))) {
                    queue.note_leader_contact(leader);
                }
                encode(&response)
            }
            RpcKind::Vote => {
                let request = postcard::from_bytes(payload).map_err(decode)?;
                // Quiet groups have no leader lease: `vote_guard.rs`.
                if queue.refuses_vote(&request) {
                    encode(&queue.refusal().await)
                } else {
                    let answer = raft.vote(request.clone()).await;
                    queue.note_vote_answer(&request, &answer);
                    encode(&answer)
                }
            }
            RpcKind::InstallSnapshot => {
                let chunk = postcard::from_bytes(payload).map_err(decode)?;
                let dir = self.group_dir(envelope.channel);
                let staging = move || {
                    super::replica_files::incoming_file(&dir).map(super::snapshot_data::Staging)
                };
                encode(&queue.shared.snapshot_in.take(raft, chunk, staging).await)
            }
            RpcKind::TransferLeader => {
                let request: openraft::raft::TransferLeaderRequest<QueueRaft> =
                    postcard::from_bytes(payload).map_err(decode)?;
                // A stopping node takes no leadership: it would hold it
                // only until its groups shut down (`rebalance.rs`). The
                // leader keeps leading when its target does not take over.
                if *request.to_node_id() == self.node_id
                    && self.stopping.load(std::sync::atomic::Ordering::Acquire)
                {
                    return Err(remote("this node is stopping: no transfer to it".into()));
                }
                encode(&raft.handle_transfer_leader(request).await)
            }
            // Taken by `handle_rpc` before this.
            RpcKind::AppendStream => return Err(remote("pipelined append out of order".into())),
            // Only the metadata group takes these; its group id never
            // matches a queue name, so this is not reached.
            RpcKind::MetaPropose => return Err(remote("not a queue RPC".into())),
        };
        reply.map_err(remote)
    }
}
