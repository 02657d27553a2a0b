//! Fuzzes the dead-lettered copy of a received message
//! (`codec/dead_letter.rs`: the death annotations written into it, the
//! dead-letter key read back). The check is
//! `broker::fuzz_checks::dead_letter`, shared with the stable-toolchain
//! corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::dead_letter(data));
