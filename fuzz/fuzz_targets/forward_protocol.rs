//! Fuzzes the forwarding messages (`forward/protocol.rs` `decode`). The
//! check (what must hold beyond "no panic") is
//! `broker::fuzz_checks::forward_protocol`, shared with the stable-toolchain
//! corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::forward_protocol(data));
