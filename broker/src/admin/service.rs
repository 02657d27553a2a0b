//! [`AdminService`]: answers the operator's requests (`ramqp-ctl`) that
//! reach this node over the fabric, from the node's own view: its registry,
//! its Raft groups, the cluster metadata and the fabric's links.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use super::{AdminHandler, FabricControl, QueueChange, QueueControl, QueueControlError};
use super::{AdminRequest, AdminResponse, MemberStatus, NodeStatus, QueueStatus};
use crate::meta::{Metadata, NodeInfo};
use crate::net::NodeId;
use crate::queue::{Queue, QueueDirectory};
use crate::quorum::QuorumNode;

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
    pub(crate) fabric: Arc<dyn FabricControl>,
    /// Deleting and purging queues (the node assembly's).
    pub(crate) control: Arc<dyn QueueControl>,
    pub(crate) allow_fault_injection: bool,
}

impl AdminService {
    async fn answer(&self, request: AdminRequest) -> AdminResponse {
        match request {
            AdminRequest::Status => AdminResponse::Status(self.status()),
            AdminRequest::AddNode { id, fabric } => {
                let addr: SocketAddr = match fabric.parse() {
                    Ok(addr) => addr,
                    Err(e) => {
                        return AdminResponse::Failed(format!("fabric address {fabric}: {e}"))
                    }
                };
                // This node dials it at once; the others learn it from the
                // metadata (and the leader from the learner's address).
                self.fabric.add_peer(id, addr);
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
                // Accept the address as the operator sees it (/quorum/q) or the bare name.
                let name = queue
                    .as_deref()
                    .map(|q| q.strip_prefix("/quorum/").unwrap_or(q));
                match self.quorum.move_leadership(name, to).await {
                    Ok(summary) => AdminResponse::Done(summary),
                    Err(e) => AdminResponse::Failed(e.to_string()),
                }
            }
            AdminRequest::DeleteQueue { address, hops } => {
                let change = self.control.delete(&address).await;
                let next = AdminRequest::DeleteQueue {
                    address,
                    hops: hops.saturating_add(1),
                };
                self.settle_change(change, next, hops).await
            }
            AdminRequest::PurgeQueue { address, hops } => {
                let change = self.control.purge(&address).await;
                let next = AdminRequest::PurgeQueue {
                    address,
                    hops: hops.saturating_add(1),
                };
                self.settle_change(change, next, hops).await
            }
            AdminRequest::Isolate { isolated } => {
                if !self.allow_fault_injection {
                    return AdminResponse::Failed(
                        "fault injection is off on this node (--allow-fault-injection)".into(),
                    );
                }
                self.fabric.set_isolated(isolated);
                AdminResponse::Done(format!(
                    "node {} {}",
                    self.node_id,
                    if isolated { "isolated" } else { "healed" }
                ))
            }
        }
    }

    /// The answer for a delete or purge: done here, or passed on to the
    /// node that can do it (a replica may send it on to the leader once).
    async fn settle_change(
        &self,
        change: Result<QueueChange, QueueControlError>,
        next: AdminRequest,
        hops: u8,
    ) -> AdminResponse {
        match change {
            Ok(QueueChange::Done(summary)) => AdminResponse::Done(summary),
            Err(error) => AdminResponse::Failed(error.to_string()),
            Ok(QueueChange::Elsewhere(node)) if hops >= MAX_HOPS || node == self.node_id => {
                AdminResponse::Failed(format!("node {node} should serve this; ask it"))
            }
            Ok(QueueChange::Elsewhere(node)) => {
                let envelope = crate::net::Envelope {
                    channel: 0,
                    kind: super::ADMIN_ENVELOPE_KIND,
                    meta: Bytes::new(),
                    payload: Bytes::from(super::encode_request(&next)),
                };
                match self.fabric.call(self.node_id, node, envelope).await {
                    Ok(answer) => super::decode_response(&answer).unwrap_or_else(|e| {
                        AdminResponse::Failed(format!("node {node}: bad answer: {e}"))
                    }),
                    Err(e) => AdminResponse::Failed(format!("node {node} unreachable: {e}")),
                }
            }
        }
    }

    async fn ask_to_step_down(&self, id: NodeId) -> String {
        use crate::net::Envelope;
        let request = AdminRequest::MoveLeadership {
            queue: None,
            to: None,
        };
        let envelope = Envelope {
            channel: 0,
            kind: super::ADMIN_ENVELOPE_KIND,
            meta: Bytes::new(),
            payload: Bytes::from(super::encode_request(&request)),
        };
        match self.fabric.call(self.node_id, id, envelope).await {
            Ok(answer) => match super::decode_response(&answer) {
                Ok(AdminResponse::Done(summary)) => format!("node {id}: {summary}"),
                Ok(other) => format!("node {id} did not hand its queues away: {other:?}"),
                Err(e) => format!("node {id}: bad answer: {e}"),
            },
            // Down: its groups elect among the remaining replicas.
            Err(e) => format!("node {id} not asked to hand its queues away ({e})"),
        }
    }

    fn status(&self) -> NodeStatus {
        let links: BTreeMap<NodeId, (SocketAddr, bool)> = self
            .fabric
            .peers()
            .into_iter()
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
                    fabric: self.fabric.local_addr().to_string(),
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

    fn queues(&self) -> Vec<QueueStatus> {
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
            let metrics = queue.metrics().borrow().clone();
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
