//! Fuzzes the fabric's prost `Batch` decoding. The check (what must hold
//! beyond "no panic") is `fabric::fuzz_checks::batch`, shared with the
//! stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fabric::fuzz_checks::batch(data));
