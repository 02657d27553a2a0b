//! Quorum queues across embedded 3-node clusters: many queues, placement
//! and balance, leaderships back to their preferred node, quiet groups,
//! streams waiting on a lost node, a crashed leader's successor, the vote
//! guard, and the model-checked history.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test quorum_cluster <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod quorum_lost_peer;
mod quorum_many_queues;
mod quorum_model;
mod quorum_placement;
mod quorum_quiet;
mod quorum_rebalance;
mod quorum_succession;
mod quorum_vote_guard;
