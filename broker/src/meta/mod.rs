//! Cluster metadata, replicated on every node by one Raft group (the
//! metadata group, [`META_GROUP`]): the cluster's members, every quorum
//! queue with its replica set (first = preferred leader), and a version.
//! Any node can declare a queue; the state machine places its replicas so
//! that preferred leaders and replicas spread evenly over the nodes.
//!
//! - `types.rs`: the openraft type config [`MetaRaft`], the reserved group
//!   id, the requests forwarded to the leader.
//! - `state.rs`: [`ClusterState`] and its [`MetaCommand`]s (pure).
//! - `placement_index.rs`: the per-node counts placement reads, kept
//!   beside the state so a declaration does not walk every queue.
//! - `state_machine.rs`: openraft's state machine and snapshot file.
//! - `fuzz_checks.rs`: the fuzz targets' checks of the snapshot file and
//!   the group's fabric payloads.
//! - `service.rs`: [`Metadata`], the node's handle (open/bootstrap,
//!   reads, changes, node addition and removal).
//! - `rpc.rs`: getting a change to the leader (local or forwarded, with
//!   back-off, under a deadline) and serving the group's RPCs.
//!
//! This module records intent only (which nodes should hold which queue);
//! the quorum-queue side (`crate::quorum`) acts on it. It shares the
//! node's log store and transport with the queues' groups and reuses their
//! Raft network (`raft::network`).

//! # Bootstrapping
//!
//! A new cluster's nodes each call [`Metadata::open`] with the same
//! `initial` member map (id → fabric address); each initializes the group
//! with it (openraft accepts identical initializations) and the seeded
//! members can hold queues at once. A restarted node's log decides; its
//! `initial` is ignored. Each node may then [`Metadata::announce`] its
//! AMQP address.
//!
//! # Adding a node (e.g. a 4th)
//!
//! 1. Start the new node with an EMPTY `initial` (never a member set that
//!    includes it: it would initialize a second, conflicting group), with
//!    its RPCs routed to its `Metadata` ([`Metadata::handle_rpc`]) and the
//!    other nodes able to reach its fabric address.
//! 2. On any running member, call [`Metadata::add_node`]`(id, info)`. The
//!    leader adds it as a learner and waits until it has caught up (by
//!    snapshot if the log was purged), makes it a voter, then records it
//!    as a member. Bounded by `membership_timeout`; safe to repeat.
//! 3. From then on new queues are placed on it first (it has the fewest
//!    preferred leaderships). Existing queues stay where they are; move
//!    some with [`Metadata::set_queue_members`] / [`Metadata::move_leader`]
//!    to rebalance.
//!
//! # Removing a node
//!
//! 1. On any member other than the one leaving (it may be down), call
//!    [`Metadata::remove_node`]`(id)`. The node leaves the group's voters
//!    (if it led, a new leader takes over), then the member list; each
//!    queue that had a replica on it gets a replacement (the node with the
//!    fewest replicas), so queues keep their replication factor while the
//!    cluster has enough nodes; if it was a preferred leader, the next
//!    replica becomes it. Safe to repeat.
//! 2. The quorum-queue side moves the replicas (it watches
//!    [`Metadata::changes`]); then stop the node ([`Metadata::shutdown`])
//!    and delete its data directory. It must not be restarted with its
//!    old data into the same cluster.
//!
//! # Moving a queue's leadership for maintenance
//!
//! [`Metadata::move_leader`]`(queue, node)` makes another replica the
//! preferred leader; the quorum-queue side transfers leadership to match.

pub(crate) mod fuzz_checks;
mod handoff;
mod placement_index;
mod rpc;
mod service;
mod state;
mod state_machine;
mod types;

pub use service::{MetaError, MetaOptions, Metadata};
pub use state::{ClusterState, MetaCommand, MetaResponse, NodeInfo, QueueInfo};
pub use types::{MetaRaft, META_GROUP, META_GROUP_NAME};
