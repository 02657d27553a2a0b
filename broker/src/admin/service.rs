//! [`AdminService`]: answers the operator's requests, from the node's own
//! view: its registry, its Raft groups, the cluster metadata and the
//! fabric's links. `ramqp-ctl`'s arrive over the fabric as postcard; the
//! HTTP management API (`crate::http`) calls the same methods in process.
//! A node without a fabric (alone, or in an embedded cluster) has one too:
//! it answers what needs no fabric and passes nothing on.

use openraft::async_runtime::watch::WatchReceiver;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use super::{AdminHandler, FabricControl, QueueChange, QueueControl, QueueControlError};
use super::{AdminRequest, AdminResponse, MemberStatus, NodeStatus, QueueStatus};
use crate::meta::{Metadata, NodeInfo};
use crate::net::NodeId;
use crate::queue::{Queue, QueueDirectory};
use crate::quorum::{QuorumError, QuorumNode};

/// Nodes a delete or purge may be passed on through (the first node,
/// a replica, the leader).
const MAX_HOPS: u8 = 2;

/// The node's side of `ramqp-ctl`.
pub(crate) struct AdminService {
    pub(crate) node_id: NodeId,
    pub(crate) amqp: SocketAddr,
    pub(crate) queues: Arc<dyn QueueDirectory>,
    pub(crate) quorum: Arc<QuorumNode>,
    pub(crate) metadata: Arc<Metadata>,
    /// The fabric, in cluster mode between processes.
    pub(crate) fabric: Option<Arc<dyn FabricControl>>,
    /// Deleting and purging queues (the node assembly's).
    pub(crate) control: Arc<dyn QueueControl>,
    pub(crate) allow_fault_injection: bool,
}

/// What a request that needs the fabric answers on a node without one.
fn no_fabric() -> AdminResponse {
    AdminResponse::Failed("this node runs without a fabric (--fabric-listen)".into())
}

impl AdminService {
    /// Answer one request.
    pub(crate) async fn answer(&self, request: AdminRequest) -> AdminResponse {
        match request {
            AdminRequest::Status => AdminResponse::Status(self.status()),
            AdminRequest::AddNode { id, fabric } => {
                let Some(links) = &self.fabric else {
                    return no_fabric();
                };
                let addr: SocketAddr = match fabric.parse() {
                    Ok(addr) => addr,
                    Err(e) => {
                        return AdminResponse::Failed(format!("fabric address {fabric}: {e}"))
                    }
                };
                // This node dials it at once; the others learn it from the
                // metadata (and the leader from the learner's address).
                links.add_peer(id, addr);
                let info = NodeInfo { fabric, amqp: None };
                match self.metadata.add_node(id, info).await {
                    Ok(()) => AdminResponse::Done(format!("node {id} is a member")),
                    Err(e) => AdminResponse::Failed(e.to_string()),
                }
            }
            AdminRequest::RemoveNode { id } => {
                // First ask the leaving node (if it is up) to hand the
                // queues it leads to their other replicas: once removed it
                // no longer hears the metadata, and the fabric of the
                // others drops it, so otherwise its groups would only move
                // after their leases ran out.
                let handed = self.ask_to_step_down(id).await;
                if let Err(e) = self.metadata.remove_node(id).await {
                    return AdminResponse::Failed(e.to_string());
                }
                AdminResponse::Done(format!("node {id} removed; {handed}"))
            }
            AdminRequest::MoveLeadership { queue, to } => {
                match self.move_leadership(queue.as_deref(), to).await {
                    Ok(summary) => AdminResponse::Done(summary),
                    Err(e) => AdminResponse::Failed(e.to_string()),
                }
            }
            AdminRequest::DeleteQueue { address, hops } => {
                match self.delete_queue_from(address, hops).await {
                    Ok(summary) => AdminResponse::Done(summary),
                    Err(e) => AdminResponse::Failed(e.to_string()),
                }
            }
            AdminRequest::PurgeQueue { address, hops } => {
                match self.purge_queue_from(address, hops).await {
                    Ok(summary) => AdminResponse::Done(summary),
                    Err(e) => AdminResponse::Failed(e.to_string()),
                }
            }
            AdminRequest::Isolate { isolated } => {
                let Some(links) = &self.fabric else {
                    return no_fabric();
                };
                if !self.allow_fault_injection {
                    return AdminResponse::Failed(
                        "fault injection is off on this node (--allow-fault-injection)".into(),
                    );
                }
                links.set_isolated(isolated);
                AdminResponse::Done(format!(
                    "node {} {}",
                    self.node_id,
                    if isolated { "isolated" } else { "healed" }
                ))
            }
        }
    }

    /// Hand the leadership of quorum queue `queue` (an address
    /// `/quorum/<name>` or the bare name; every queue this node leads when
    /// `None`) to `to` (the group chooses when `None`); a summary.
    pub(crate) async fn move_leadership(
        &self,
        queue: Option<&str>,
        to: Option<NodeId>,
    ) -> Result<String, QuorumError> {
        let name = queue.map(|q| q.strip_prefix("/quorum/").unwrap_or(q));
        self.quorum.move_leadership(name, to).await
    }

    /// Delete the queue at `address` here, or through the node that can
    /// (its links are detached with amqp:resource-deleted); a summary.
    pub(crate) async fn delete_queue(&self, address: &str) -> Result<String, QueueControlError> {
        self.delete_queue_from(address.to_owned(), 0).await
    }

    /// Purge the queue at `address` here, or through the node that can; a
    /// summary ([`super::purged_messages`] reads the count back).
    pub(crate) async fn purge_queue(&self, address: &str) -> Result<String, QueueControlError> {
        self.purge_queue_from(address.to_owned(), 0).await
    }

    async fn delete_queue_from(
        &self,
        address: String,
        hops: u8,
    ) -> Result<String, QueueControlError> {
        let change = self.control.delete(&address).await;
        let next = AdminRequest::DeleteQueue {
            address,
            hops: hops.saturating_add(1),
        };
        self.settle_change(change, next, hops).await
    }

    async fn purge_queue_from(
        &self,
        address: String,
        hops: u8,
    ) -> Result<String, QueueControlError> {
        let change = self.control.purge(&address).await;
        let next = AdminRequest::PurgeQueue {
            address,
            hops: hops.saturating_add(1),
        };
        self.settle_change(change, next, hops).await
    }

    /// The outcome of a delete or purge: done here, or passed on to the
    /// node that can do it (a replica may send it on to the leader once).
    /// What the other node answers comes back as text: its refusal is
    /// [`QueueControlError::Failed`].
    async fn settle_change(
        &self,
        change: Result<QueueChange, QueueControlError>,
        next: AdminRequest,
        hops: u8,
    ) -> Result<String, QueueControlError> {
        let node = match change? {
            QueueChange::Done(summary) => return Ok(summary),
            QueueChange::Elsewhere(node) => node,
        };
        if hops >= MAX_HOPS || node == self.node_id || self.fabric.is_none() {
            return Err(QueueControlError::Failed(format!(
                "node {node} should serve this; ask it"
            )));
        }
        match self.ask(node, &next).await {
            AdminResponse::Done(summary) => Ok(summary),
            AdminResponse::Failed(error) => Err(QueueControlError::Failed(error)),
            AdminResponse::Status(_) => Err(QueueControlError::Failed(format!(
                "node {node}: a status instead of an outcome"
            ))),
        }
    }

    /// Ask node `node` over the fabric (a failure to reach it, or no
    /// fabric, is a [`AdminResponse::Failed`]).
    pub(crate) async fn ask(&self, node: NodeId, request: &AdminRequest) -> AdminResponse {
        let Some(fabric) = &self.fabric else {
            return AdminResponse::Failed(format!(
                "node {node} should serve this; this node has no fabric to ask it"
            ));
        };
        let envelope = crate::net::Envelope {
            channel: 0,
            kind: super::ADMIN_ENVELOPE_KIND,
            meta: Bytes::new(),
            payload: Bytes::from(super::encode_request(request)),
        };
        match fabric.call(self.node_id, node, envelope).await {
            Ok(answer) => super::decode_response(&answer)
                .unwrap_or_else(|e| AdminResponse::Failed(format!("node {node}: bad answer: {e}"))),
            Err(e) => AdminResponse::Failed(format!("node {node} unreachable: {e}")),
        }
    }

    async fn ask_to_step_down(&self, id: NodeId) -> String {
        if self.fabric.is_none() {
            return format!("node {id} not asked to hand its queues away (no fabric)");
        }
        let request = AdminRequest::MoveLeadership {
            queue: None,
            to: None,
        };
        match self.ask(id, &request).await {
            AdminResponse::Done(summary) => format!("node {id}: {summary}"),
            // Down: its groups elect among the remaining replicas.
            AdminResponse::Failed(e) => {
                format!("node {id} not asked to hand its queues away ({e})")
            }
            other => format!("node {id} did not hand its queues away: {other:?}"),
        }
    }

    /// This node's view of the cluster and its queues.
    pub(crate) fn status(&self) -> NodeStatus {
        let links: BTreeMap<NodeId, (SocketAddr, bool)> = self
            .fabric
            .iter()
            .flat_map(|fabric| fabric.peers())
            .map(|(id, addr, up)| (id, (addr, up)))
            .collect();
        let mut members: BTreeMap<NodeId, MemberStatus> = BTreeMap::new();
        for (id, info) in self.metadata.members() {
            members.insert(
                id,
                MemberStatus {
                    id,
                    fabric: info.fabric,
                    reachable: id == self.node_id || links.get(&id).is_some_and(|l| l.1),
                },
            );
        }
        if members.is_empty() {
            // Before the metadata's first entry is applied: the peers
            // this node was configured with.
            for (id, (addr, up)) in &links {
                members.insert(
                    *id,
                    MemberStatus {
                        id: *id,
                        fabric: addr.to_string(),
                        reachable: *up,
                    },
                );
            }
            members.insert(
                self.node_id,
                MemberStatus {
                    id: self.node_id,
                    fabric: self
                        .fabric
                        .as_ref()
                        .map(|f| f.local_addr().to_string())
                        .unwrap_or_default(),
                    reachable: true,
                },
            );
        }
        NodeStatus {
            node_id: self.node_id,
            amqp: self.amqp.to_string(),
            members: members.into_values().collect(),
            metadata_leader: self.metadata.leader(),
            queues: self.queues(),
        }
    }

    /// Every queue this node knows, sorted by address.
    pub(crate) fn queues(&self) -> Vec<QueueStatus> {
        let mut queues: BTreeMap<String, QueueStatus> = BTreeMap::new();
        for info in self.metadata.queues() {
            let address = format!("/quorum/{}", info.name);
            queues.insert(
                address.clone(),
                QueueStatus {
                    address,
                    leader: None,
                    members: info.members,
                    ready: 0,
                    unsettled: 0,
                    consumers: 0,
                    applied_index: None,
                    term: None,
                },
            );
        }
        for queue in self.quorum.queues() {
            let stats = queue.stats();
            let metrics = queue.metrics().borrow_watched().clone();
            let entry = queues
                .entry(stats.address.clone())
                .or_insert_with(|| QueueStatus {
                    address: stats.address.clone(),
                    leader: None,
                    members: metrics.membership_config.membership().voter_ids().collect(),
                    ready: 0,
                    unsettled: 0,
                    consumers: 0,
                    applied_index: None,
                    term: None,
                });
            entry.leader = metrics.current_leader;
            entry.ready = stats.ready;
            entry.unsettled = stats.unsettled;
            entry.consumers = stats.consumers;
            entry.applied_index = metrics.last_applied.map(|id| id.index);
            entry.term = Some(metrics.current_term);
        }
        for stats in self.queues.stats() {
            if stats.address.starts_with("/quorum/") {
                continue;
            }
            queues.insert(
                stats.address.clone(),
                QueueStatus {
                    address: stats.address,
                    leader: Some(self.node_id),
                    members: Vec::new(),
                    ready: stats.ready,
                    unsettled: stats.unsettled,
                    consumers: stats.consumers,
                    applied_index: None,
                    term: None,
                },
            );
        }
        queues.into_values().collect()
    }
}

impl AdminHandler for AdminService {
    fn admin(self: Arc<Self>, payload: Bytes) -> fabric::BoxFuture<'static, Bytes> {
        Box::pin(async move {
            let response = match postcard::from_bytes::<AdminRequest>(&payload) {
                Ok(request) => self.answer(request).await,
                Err(e) => AdminResponse::Failed(format!("bad admin request: {e}")),
            };
            postcard::to_allocvec(&response)
                .map(Bytes::from)
                .unwrap_or_default()
        })
    }
}
