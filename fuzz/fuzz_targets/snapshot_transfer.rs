//! Fuzzes the snapshot body stream a leader sends a follower
//! (`quorum/snapshot_transfer.rs` `read`). The check (what must hold beyond
//! "no panic") is `broker::fuzz_checks::snapshot_transfer`, shared with the
//! stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::snapshot_transfer(data));
