//! Fuzzes records read from the redb log store
//! (`store_redb::record::decode`) as the broker's types. The check (what
//! must hold beyond "no panic") is `broker::fuzz_checks::store_record`,
//! shared with the stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::store_record(data));
