//! `GET /api/overview` and `GET /api/nodes`: the node, its cluster's
//! members as this node sees them (admin's status) and a few counts.
//! The overview is for every caller (the web page reads it; its queue
//! count is of the queues the caller may see); the nodes list needs the
//! administrator tag.

use hyper::StatusCode;
use serde::Serialize;

use super::access::Caller;
use super::reply;
use crate::admin::MemberStatus;
use crate::http::{Answer, Sources};

/// A member of the cluster.
#[derive(Debug, Serialize)]
pub(super) struct MemberView {
    id: u64,
    /// Its fabric address (empty for a node without a fabric).
    fabric: String,
    /// Whether this node reaches it now (always true for itself).
    reachable: bool,
}

impl From<MemberStatus> for MemberView {
    fn from(member: MemberStatus) -> MemberView {
        MemberView {
            id: member.id,
            fabric: member.fabric,
            reachable: member.reachable,
        }
    }
}

#[derive(Debug, Serialize)]
struct Overview {
    node_id: u64,
    cluster_name: String,
    version: &'static str,
    metadata_leader: Option<u64>,
    members: Vec<MemberView>,
    /// Queues the caller may see.
    queue_count: usize,
    /// AMQP connections served by this node now.
    connection_count: usize,
}

/// `GET /api/overview`.
pub(super) fn overview(sources: &Sources, caller: &Caller) -> Answer {
    let status = sources.admin.status();
    let queue_count = status
        .queues
        .iter()
        .filter(|q| caller.may_see(&q.address))
        .count();
    let overview = Overview {
        node_id: status.node_id,
        cluster_name: sources.cluster_name.clone(),
        version: env!("CARGO_PKG_VERSION"),
        metadata_leader: status.metadata_leader,
        members: status.members.into_iter().map(MemberView::from).collect(),
        queue_count,
        connection_count: sources.connections.len(),
    };
    reply::json(StatusCode::OK, &overview)
}

/// `GET /api/nodes` (administrator).
pub(super) fn nodes(sources: &Sources, caller: &Caller) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    let members: Vec<MemberView> = sources
        .admin
        .status()
        .members
        .into_iter()
        .map(MemberView::from)
        .collect();
    reply::json(StatusCode::OK, &members)
}
