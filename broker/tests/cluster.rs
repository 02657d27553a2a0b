//! Embedded clusters: forwarding from followers to leaders (cut-offs,
//! restarts, settlement), the metadata group, the cluster-wide HTTP API,
//! dead letters across nodes, many brokers in one process.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test cluster <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod dead_letter_cluster;
mod embed_many_brokers;
mod forwarding;
mod forwarding_cut_off;
mod forwarding_restarts;
mod forwarding_settles;
mod http_api_cluster;
mod meta_cluster;
