//! Cluster metadata, replicated on every node by one Raft group (the
//! metadata group, [`META_GROUP`]): the cluster's members, every quorum
//! queue with its replica set (first = preferred leader), and a version.
//! Any node can declare a queue; the state machine places its replicas so
//! that preferred leaders and replicas spread evenly over the nodes.
//!
//! - `types.rs`: the openraft type config [`MetaRaft`], the reserved group
//!   id, the requests forwarded to the leader.
//! - `state.rs`: [`ClusterState`] and its [`MetaCommand`]s (pure).
//! - `state_machine.rs`: openraft's state machine and snapshot file.
//! - `service.rs`: [`Metadata`], the node's handle (open/bootstrap,
//!   reads, changes, node addition and removal).
//! - `rpc.rs`: getting a change to the leader (local or forwarded, with
//!   back-off, under a deadline) and serving the group's RPCs.
//!
//! This module records intent only (which nodes should hold which queue);
//! the quorum-queue side (`crate::quorum`) acts on it. It shares the
//! node's log store and transport with the queues' groups and reuses their
//! Raft network (`quorum::network`).

mod rpc;
mod service;
mod state;
mod state_machine;
mod types;

pub use service::{MetaError, MetaOptions, Metadata};
pub use state::{ClusterState, MetaCommand, MetaResponse, NodeInfo, QueueInfo};
pub use types::{MetaRaft, META_GROUP, META_GROUP_NAME};
