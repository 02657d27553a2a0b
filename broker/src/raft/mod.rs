//! Raft plumbing shared by every Raft group of a node: the quorum queues'
//! groups (`crate::quorum`) and the cluster-metadata group (`crate::meta`).
//!
//! - `group.rs`: group ids (derived from a queue's name; id 0 reserved);
//! - `lean_runtime.rs`, `lean_mpsc.rs`, `lean_select.rs`, `lean_watch.rs`:
//!   the runtime the quorum groups run on, tokio with openraft's channels
//!   a queue under a mutex, its selects holding each future once and its
//!   watch channels one `Notify` each (less heap per group);
//! - `network.rs`: openraft's network traits over a [`crate::net::NodeTransport`];
//! - `open_clients.rs`: how many of the groups' peer connections are open;
//! - `append_stream.rs`: the leader's pipelined AppendEntries to a follower;
//! - `append_feed.rs`: the follower's side, one ordered feed per group;
//! - `snapshot_stream.rs`: a snapshot sent to a follower in chunks, and
//!   received, for openraft 0.10's whole-snapshot API;
//! - `rpc_kind.rs`: which Raft RPC an [`crate::net::Envelope`] carries;
//! - `store.rs`: opening the node-wide log store (one redb file);
//! - `leadership.rs`: the steps of a leadership hand-off that do not depend
//!   on what a group replicates;
//! - `fault.rs`: whether a group's core stopped on a storage error;
//! - `purge_gate.rs`: a log store whose purge waits for a durable snapshot;
//! - `status.rs`: a group's term, log and applied index and leader, for
//!   operators and metrics;
//! - `fuzz_checks.rs`: the round-trip checks of the fuzz targets for
//!   postcard payloads and Raft RPCs.
//!
//! Architecture invariant: nothing here knows what a group replicates
//! (queues, messages, cluster members). It sits below `quorum` and `meta`,
//! which never import each other: what both need lives here.

pub mod append_feed;
pub mod append_stream;
mod fault;
pub(crate) mod fuzz_checks;
mod group;
pub(crate) mod leadership;
mod lean_mpsc;
mod lean_runtime;
mod lean_select;
mod lean_watch;
pub(crate) mod network;
mod open_clients;
mod purge_gate;
mod rpc_kind;
pub(crate) mod snapshot_stream;
mod status;
mod store;

pub(crate) use fault::{core_fault, FirstFault};
pub use group::{group_id, GroupId, RESERVED_GROUP_ID};
pub(crate) use leadership::{MetricsWatch, ServerMetricsWatch};
pub(crate) use lean_mpsc::pop_trimmed;
pub use lean_runtime::LeanRuntime;
pub(crate) use network::PeerReach;
pub use open_clients::OpenClients;
pub(crate) use purge_gate::{PurgeGatedLog, SnapshotCover};
pub use rpc_kind::RpcKind;
pub(crate) use snapshot_stream::{SnapshotChunk, SnapshotReceiver, SnapshotSink};
pub use status::RaftStatus;
#[cfg(feature = "test-cluster")]
pub(crate) use store::lossy;
pub(crate) use store::open_log_store;
