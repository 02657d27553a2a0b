//! Fuzzes the WebSocket frame reader (`broker/src/ws/frame.rs`) with the
//! bytes a peer sends after the upgrade. The check (same payload, control
//! frames and violation whole or chunked) is `broker::fuzz_checks::ws_frames`,
//! shared with the stable-toolchain corpus replay test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| broker::fuzz_checks::ws_frames(data));
