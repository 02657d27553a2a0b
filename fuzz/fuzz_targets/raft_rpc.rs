//! Fuzzes the postcard Raft RPC payloads of quorum-queue and metadata
//! groups, and the metadata group's forwarded proposals. The check (what
//! must hold beyond "no panic") is `broker::fuzz_checks::raft_rpc`, shared
//! with the stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::raft_rpc(data));
