//! Fuzzes the log store's append journal as read at open
//! (`store_redb`'s journal scan). The check (what must hold beyond "no
//! panic") is `broker::fuzz_checks::store_journal`, shared with the
//! stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::store_journal(data));
