//! The node assembly, the top layer: [`Broker`] wires every part of a node
//! together (data directory, transport, quorum side, cluster metadata,
//! forwarding, the queue registry, the operator's service) and serves AMQP.
//! It is the only module that may import every other; nothing imports it.
//!
//! - `broker.rs`: [`Broker`], start and graceful stop;
//! - `startup.rs`: configuration checks and what is derived from it;
//! - `data_dir.rs`: the data directory (given, or temporary);
//! - `accept.rs`: the AMQP accept loop;
//! - `fatal.rs`: watching for storage faults that leave the node unable to
//!   serve (`Broker::fatal`);
//! - `dispatcher.rs`: the node's transport handler (Raft, metadata, forwarding);
//! - `registry.rs`: queues by address (the engine's `QueueDirectory`);
//! - `dead_letter_router.rs`: publishing dead-lettered messages through it;
//! - `queue_admin.rs`: deleting and purging queues (admin's `QueueControl`);
//! - `expiry_sweep.rs`: the node's once-a-second sweep of expired messages;
//! - `route_sweep.rs`: letting go of the routed queues nothing uses;
//! - `policies.rs`: replacing the queue policy set and putting it on every
//!   open queue;
//! - `replica_sets.rs`: the cluster metadata as the quorum side's replica sets;
//! - `fabric.rs`: the node transport over the gRPC fabric, following the
//!   metadata's members;
//! - `http_view.rs`: what the HTTP endpoint (`crate::http`) may read of
//!   the node;
//! - `cluster.rs`: an embedded multi-node cluster for tests (feature
//!   `test-cluster`).

mod accept;
mod address_slots;
mod broker;
#[cfg(feature = "test-cluster")]
mod cluster;
mod data_dir;
mod dead_letter_router;
mod dispatcher;
mod expiry_sweep;
mod fabric;
mod fatal;
mod http_view;
mod policies;
mod queue_admin;
mod registry;
mod replica_sets;
mod route_sweep;
mod startup;

pub use broker::{Broker, BrokerError, Reloaded};
#[cfg(feature = "test-cluster")]
pub use cluster::Cluster;
pub use fatal::FatalError;
