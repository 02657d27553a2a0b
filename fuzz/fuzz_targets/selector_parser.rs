//! Fuzzes the JMS selector parser and evaluator (`queue/filter/`). The
//! check is `broker::fuzz_checks::selector_parser`, shared with the
//! stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::selector_parser(data));
