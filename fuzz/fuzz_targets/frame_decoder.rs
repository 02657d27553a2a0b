//! Fuzzes `decode_frame` as the connection's read loop drives it (64 KiB
//! max-frame-size), whole and split in two. The check (what must hold beyond
//! "no panic") is `broker::fuzz_checks::frame_decoder`, shared with the
//! stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::frame_decoder(data));
