//! The cluster metadata seen as the quorum side's [`ReplicaSets`]: the one
//! place where `crate::meta` and `crate::quorum`, siblings that never import
//! each other, are joined.

use std::sync::Arc;

use tokio::sync::watch;

use crate::meta::{Metadata, QueueInfo};
use crate::net::NodeId;
use crate::quorum::{BoxFuture, ReplicaSet, ReplicaSets};

/// [`Metadata`] as the quorum side's record of replica sets.
pub(crate) struct MetadataReplicaSets(pub(crate) Arc<Metadata>);

fn replica_set(info: QueueInfo) -> ReplicaSet {
    ReplicaSet {
        name: info.name,
        group: info.group,
        members: info.members,
    }
}

impl ReplicaSets for MetadataReplicaSets {
    fn replica_set(&self, name: &str) -> Option<ReplicaSet> {
        self.0.queue(name).map(replica_set)
    }

    fn all(&self) -> Vec<ReplicaSet> {
        self.0.queues().into_iter().map(replica_set).collect()
    }

    fn declare<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<ReplicaSet, String>> {
        Box::pin(async move {
            self.0
                .declare_queue(name)
                .await
                .map(replica_set)
                .map_err(|e| e.to_string())
        })
    }

    fn set_preferred_leader<'a>(
        &'a self,
        name: &'a str,
        to: NodeId,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.0
                .move_leader(name, to)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.0.changes()
    }
}
