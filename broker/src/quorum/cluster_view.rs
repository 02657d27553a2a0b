//! What the quorum queues need from the rest of the cluster, as two small
//! traits handed in when the node is assembled (`crate::node`), so that this
//! module imports neither the cluster metadata (`crate::meta`, its sibling)
//! nor forwarding (`crate::forward`, built on top of it):
//!
//! - [`ReplicaSets`]: which nodes hold which queue (the metadata group's
//!   record), and a signal when that record changes;
//! - [`PeerRequests`]: the requests a replica sends another node (create
//!   the group as its preferred leader; campaign in a hand-off; settle by
//!   id what a leader could not replicate before it lost the leadership).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;

use crate::net::NodeId;
use crate::raft::GroupId;

/// A boxed future, as the traits below return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One queue's replica set as the cluster recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSet {
    /// The queue's name (without `/quorum/`).
    pub name: String,
    /// Its Raft group.
    pub group: GroupId,
    /// The nodes holding a replica, preferred leader first.
    pub members: Vec<NodeId>,
}

/// The cluster's record of where quorum queues live.
pub trait ReplicaSets: Send + Sync + 'static {
    /// The replica set of `name`, if it was declared.
    fn replica_set(&self, name: &str) -> Option<ReplicaSet>;
    /// Every declared queue.
    fn all(&self) -> Vec<ReplicaSet>;
    /// Declare `name` (idempotent) and return its replica set.
    fn declare<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<ReplicaSet, String>>;
    /// Record `to` as the preferred leader of `name` (after a hand-off to
    /// it), so placement keeps it there.
    fn set_preferred_leader<'a>(
        &'a self,
        name: &'a str,
        to: NodeId,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Changes whenever the record does.
    fn changes(&self) -> watch::Receiver<u64>;
}

/// Requests a replica sends to another node about one queue.
pub trait PeerRequests: Send + Sync + 'static {
    /// Ask `to`, the queue's preferred leader, to create and initialize the
    /// group of `address`, within `limit`.
    fn ask_to_create(
        &self,
        to: NodeId,
        address: String,
        limit: Duration,
    ) -> BoxFuture<'static, Result<(), String>>;
    /// Ask `to` to campaign for the leadership of `address`, which this node
    /// is handing off; the leader after the campaign, within `limit`.
    fn ask_to_elect(
        &self,
        to: NodeId,
        address: String,
        limit: Duration,
    ) -> BoxFuture<'static, Result<NodeId, String>>;
    /// Ask `to`, which this node believes leads `address`, to settle these
    /// messages by id (settlements this node took as leader but could not
    /// replicate before it lost the leadership), within `limit`: whether
    /// it led and took them, and who leads as far as it knows.
    fn ask_to_settle(
        &self,
        to: NodeId,
        address: String,
        settles: Vec<(u64, crate::queue::Outcome)>,
        limit: Duration,
    ) -> BoxFuture<'static, Result<(bool, Option<NodeId>), String>>;
}
