//! Fuzzes the node-level liveness probe and its answer
//! (`quorum/peer_liveness.rs`, postcard off the fabric). The check is
//! `broker::fuzz_checks::liveness_probe`, shared with the stable-toolchain
//! corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::liveness_probe(data));
