//! Fuzzes the composite codec decoders: performatives, SASL frames, delivery
//! states, source, target, error, header. The check (what must hold beyond
//! "no panic") is `broker::fuzz_checks::performative_decoder`, shared with
//! the stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::performative_decoder(data));
