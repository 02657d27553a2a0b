//! How a change reaches the metadata group's leader: executed on this
//! node when it leads, otherwise forwarded as a [`RpcKind::MetaPropose`]
//! RPC to the node believed to lead (then to the one it points to, then to
//! each voter in turn), with back-off, until the caller's deadline. Also
//! the server side: Raft RPCs of the group and forwarded requests.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::raft::ClientWriteResponse;
use openraft::{BasicNode, ChangeMembers};
use serde::Serialize;
use tokio::time::Instant;

use super::service::{MetaError, Metadata};
use super::state::MetaResponse;
use super::types::{MetaRaft, MetaReply, MetaRequest, META_GROUP, META_GROUP_NAME};
use crate::net::NodeId;
use crate::net::{Envelope, TransportError};
use crate::raft::RpcKind;

/// Longest pause between two attempts to reach the leader.
const BACKOFF_MAX: Duration = Duration::from_millis(500);

impl Metadata {
    /// Get `request` executed by the leader before `deadline`, then wait
    /// (within the same deadline) until this node has applied it.
    pub(super) async fn request(
        &self,
        what: &str,
        request: MetaRequest,
        deadline: Instant,
    ) -> Result<MetaResponse, MetaError> {
        let started = Instant::now();
        let (index, response) =
            match tokio::time::timeout_at(deadline, self.route(what, &request)).await {
                Ok(result) => result?,
                Err(_) => {
                    return Err(MetaError::Unavailable {
                        what: what.to_owned(),
                        after: deadline.saturating_duration_since(started),
                        leader: self.leader(),
                    })
                }
            };
        // Committed: the answer stands even if this node lags behind (a
        // node being removed may never apply it), so the wait is best
        // effort.
        let remaining = deadline.saturating_duration_since(Instant::now());
        let _ = self
            .raft
            .wait(Some(remaining))
            .applied_index_at_least(Some(index), what)
            .await;
        Ok(response)
    }

    /// Try the known leader, the leader others point to, and failing that
    /// each voter in turn, pausing (with back-off) after each miss, until
    /// one executes the request. Unbounded: the caller times it out.
    async fn route(
        &self,
        what: &str,
        request: &MetaRequest,
    ) -> Result<(u64, MetaResponse), MetaError> {
        let mut hint: Option<NodeId> = None;
        let mut misses = 0usize;
        let mut hops = 0usize;
        let mut backoff = Duration::from_millis(20);
        loop {
            let voters: Vec<NodeId> = self.voters().into_iter().collect();
            let target = match hint.take() {
                Some(target) => target,
                // Every other miss, ask someone else than the node we
                // believe leads: it may be gone (or we may be removed and
                // no longer hear who leads).
                None if misses % 2 == 1 && !voters.is_empty() => voters[misses / 2 % voters.len()],
                None => self.leader().unwrap_or(self.node_id),
            };
            let reply = if target == self.node_id {
                self.execute(request.clone()).await
            } else {
                self.forward(target, request).await
            };
            match reply {
                MetaReply::Committed { index, response } => return Ok((index, response)),
                MetaReply::Refused(reason) => {
                    return Err(MetaError::Refused {
                        what: what.to_owned(),
                        reason,
                    })
                }
                MetaReply::NotLeader(Some(leader)) if leader != target => {
                    hint = Some(leader);
                    // Follow a pointer at once, but not endlessly: two
                    // nodes with stale views (mid-election) may point at
                    // each other, and that must not spin.
                    hops += 1;
                    if hops < 3 {
                        continue;
                    }
                }
                MetaReply::NotLeader(_) | MetaReply::Elected(_) => {}
                MetaReply::Retry(reason) => {
                    tracing::debug!(node_id = self.node_id, target, %reason, "{what}: retrying");
                }
            }
            misses += 1;
            hops = 0;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    pub(super) async fn forward(&self, target: NodeId, request: &MetaRequest) -> MetaReply {
        let payload = match postcard::to_allocvec(request) {
            Ok(payload) => payload,
            Err(e) => return MetaReply::Refused(format!("cannot encode request: {e}")),
        };
        let envelope = Envelope {
            channel: META_GROUP,
            kind: RpcKind::MetaPropose.code(),
            meta: Bytes::from_static(META_GROUP_NAME.as_bytes()),
            payload: Bytes::from(payload),
        };
        match self.transport.call(self.node_id, target, envelope).await {
            Ok(reply) => postcard::from_bytes(&reply)
                .unwrap_or_else(|e| MetaReply::Retry(format!("bad answer from {target}: {e}"))),
            Err(e) => MetaReply::Retry(e.to_string()),
        }
    }

    /// Execute `request` on this node's Raft, which must lead the group.
    /// A stopping node executes nothing: the request goes elsewhere while
    /// it hands its leadership away.
    pub(super) async fn execute(&self, request: MetaRequest) -> MetaReply {
        if self.stopping.load(std::sync::atomic::Ordering::Acquire) {
            return MetaReply::Retry(format!("node {} is stopping", self.node_id));
        }
        let result = match request {
            MetaRequest::Write(command) => self.raft.client_write(command).await,
            MetaRequest::AddLearner { id, info } => {
                let added = self
                    .raft
                    .add_learner(id, BasicNode::new(info.fabric), false)
                    .await;
                match added {
                    Ok(written) => {
                        if let Err(reason) = self.await_learner(id, written.log_id).await {
                            return MetaReply::Refused(reason);
                        }
                        Ok(written)
                    }
                    Err(e) => Err(e),
                }
            }
            MetaRequest::AddVoter { id } => {
                self.raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                    .await
            }
            MetaRequest::RemoveVoter { id } => {
                self.raft
                    .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
                    .await
            }
            MetaRequest::Campaign { .. } => {
                return MetaReply::Refused("a campaign is not executed by the leader".into())
            }
        };
        reply_of(result)
    }

    /// Waits until learner `id` has acknowledged the log up to `added` (the
    /// entry that made it a learner). openraft's own blocking add calls a
    /// learner up to date while it lags by fewer than its lag threshold
    /// (5,000 entries), which a small metadata log always does, so a node
    /// that never answered (unreachable, or refused by the fabric's TLS)
    /// would be promoted to voter. If it has not caught up within
    /// [`LEARNER_CATCH_UP`], it is taken out again and the add refused.
    async fn await_learner(
        &self,
        id: NodeId,
        added: openraft::alias::LogIdOf<MetaRaft>,
    ) -> Result<(), String> {
        let caught_up = self
            .raft
            .wait(Some(LEARNER_CATCH_UP))
            .metrics(
                |m| {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id))
                        .is_some_and(|matched| matched.as_ref() >= Some(&added))
                },
                "learner caught up",
            )
            .await;
        if caught_up.is_ok() {
            return Ok(());
        }
        let removed = self
            .raft
            .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false)
            .await;
        if let Err(e) = removed {
            tracing::warn!(node = id, error = %e, "could not take back a learner that never answered");
        }
        Err(format!(
            "node {id} did not catch up as a learner within {LEARNER_CATCH_UP:?}: is it \
             running, reachable, and does it hold a fabric certificate of this cluster?"
        ))
    }

    /// Answer an RPC of the metadata group: Raft RPCs from its members and
    /// requests forwarded to it as the (presumed) leader.
    pub async fn handle_rpc(&self, envelope: Envelope) -> Result<Bytes, TransportError> {
        let remote = |message: String| TransportError::Remote {
            node: self.node_id,
            message,
        };
        if envelope.channel != META_GROUP {
            return Err(remote(format!(
                "group {} is not the metadata group",
                envelope.channel
            )));
        }
        let Some(kind) = RpcKind::from_code(envelope.kind) else {
            return Err(remote(format!("not a Raft RPC: kind {}", envelope.kind)));
        };
        let payload = &envelope.payload;
        let decode = |e: postcard::Error| remote(format!("bad request: {e}"));
        let reply = match kind {
            RpcKind::AppendEntries => encode(
                &self
                    .raft
                    .append_entries(postcard::from_bytes(payload).map_err(decode)?)
                    .await,
            ),
            RpcKind::Vote => encode(
                &self
                    .raft
                    .vote(postcard::from_bytes(payload).map_err(decode)?)
                    .await,
            ),
            RpcKind::InstallSnapshot => encode(
                &self
                    .snapshot_in
                    .take(
                        &self.raft,
                        postcard::from_bytes(payload).map_err(decode)?,
                        || Ok(Vec::new()),
                    )
                    .await,
            ),
            RpcKind::TransferLeader => encode(
                &self
                    .raft
                    .handle_transfer_leader(postcard::from_bytes(payload).map_err(decode)?)
                    .await,
            ),
            // The metadata group's leader sends one append at a time
            // (its network does not pipeline).
            RpcKind::AppendStream => return Err(remote("not a metadata RPC".into())),
            RpcKind::MetaPropose => {
                let request: MetaRequest = postcard::from_bytes(payload).map_err(decode)?;
                if let MetaRequest::Campaign { from } = request {
                    return encode(&self.campaign_for(from).await).map_err(remote);
                }
                // Bounded here too: over a real network the requester
                // giving up does not cancel this side.
                let limit = match request {
                    MetaRequest::Write(_) => self.options.request_timeout,
                    _ => self.options.membership_timeout,
                };
                let reply = tokio::time::timeout(limit, self.execute(request))
                    .await
                    .unwrap_or_else(|_| {
                        MetaReply::Retry(format!("not committed within {limit:?}"))
                    });
                encode(&reply)
            }
        };
        reply.map_err(remote)
    }
}

/// How long a new learner may take to acknowledge the entry that added it.
/// A reachable node does in well under a second (the metadata log and its
/// snapshot are small); this must stay below the fabric call timeout
/// (10 s by default) that a forwarded add runs under, or the asking node
/// would time out and retry instead of hearing why.
const LEARNER_CATCH_UP: Duration = Duration::from_secs(6);

type WriteResult =
    Result<ClientWriteResponse<MetaRaft>, RaftError<MetaRaft, ClientWriteError<MetaRaft>>>;

fn reply_of(result: WriteResult) -> MetaReply {
    match result {
        Ok(written) => MetaReply::Committed {
            index: written.log_id.index,
            response: written.data,
        },
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
            MetaReply::NotLeader(forward.leader_id)
        }
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(e),
        ))) => MetaReply::Retry(e.to_string()),
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
            MetaReply::Refused(e.to_string())
        }
        // Discarded by a leader change, or a precondition we never set:
        // the requester asks again.
        Err(RaftError::APIError(e)) => MetaReply::Retry(e.to_string()),
        // Stopped or broken here; another node may lead.
        Err(RaftError::Fatal(e)) => MetaReply::Retry(e.to_string()),
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Bytes, String> {
    postcard::to_allocvec(value)
        .map(Bytes::from)
        .map_err(|e| format!("cannot encode reply: {e}"))
}
