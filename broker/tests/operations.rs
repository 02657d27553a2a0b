//! What an operator touches on one node: the HTTP API and metrics endpoint,
//! policies and limits, queue delete and purge, dead-lettering.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test operations <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod dead_letter;
mod http_api;
mod http_endpoint;
mod policies_limits;
mod policies_quorum;
mod policies_runtime;
mod queue_delete_purge;
