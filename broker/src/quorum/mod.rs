//! Quorum queues: each `/quorum/<name>` queue is one openraft group whose
//! log lives in the node's redb store (group commit across groups). A
//! publish is `accepted` only once its entry is committed on a majority and
//! fsynced; consumers are served by the group's leader.
//!
//! Message bodies past the resident budget live in each replica's segment
//! files (`crate::paging`); see `state_machine.rs` for how they relate to
//! the log and to snapshots.
//!
//! Architecture invariant: this module reaches disk only through
//! `store_redb` (the log), `crate::paging` (bodies) and its own snapshot
//! files, and other nodes only
//! through a [`crate::net::NodeTransport`]; it knows nothing of gRPC or
//! redb tables. It imports neither `crate::meta` (its sibling) nor
//! `crate::forward` (above it): what it needs from them comes in through
//! the traits of `cluster_view.rs`, wired by `crate::node`.

mod bodies;
mod budget;
mod cluster_view;
mod compaction;
mod consumer_handover;
mod dead_letter_outbox;
mod dead_letters;
mod discard;
mod feed;
mod follower_tick;
pub(crate) mod fuzz_checks;
mod handoff;
mod hold;
mod id_search;
mod idle_shed;
mod in_place;
mod index;
mod leader_contact;
mod leadership_watch;
mod length_limit;
mod lost_peer_wait;
mod node;
mod node_faults;
mod node_policies;
mod peer_liveness;
mod placement;
mod proposer;
mod publish_gate;
mod queue;
mod quiet;
mod rebalance;
mod removal;
mod reopen;
mod replica_files;
mod resident;
mod rpc;
mod settle_batcher;
mod snapshot_data;
mod snapshot_file;
mod snapshot_install;
mod snapshot_transfer;
mod state_machine;
mod stop_snapshot;
mod submit;
mod sweep_list;
mod task_queue;
mod transaction;
mod types;
mod visits;
mod vote_guard;

pub use cluster_view::{BoxFuture, PeerRequests, ReplicaSet, ReplicaSets};
pub use handoff::HandOff;
pub use lost_peer_wait::LostPeerWaits;
#[cfg(feature = "test-cluster")]
pub(crate) use node::log_path;
pub use node::{QuorumError, QuorumNode};
pub use queue::QuorumQueue;
pub use rebalance::LeaderRebalance;
pub use snapshot_data::SnapshotData;
pub use types::{Applied, Command, QueueRaft, SettleKind};
