//! The open-loop pacing thread: hands intended send times to the
//! publishers at a fixed total rate.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use ramqp_bench_compare::payload;

use crate::run::Shared;

/// The pacing thread: intended send times at `rate` msg/s from `start`,
/// round-robin over the publishers, until stopped (or `total` handed out).
/// Sleeps to ~100 µs before each tick and spins the rest, since a tokio
/// timer only has millisecond resolution.
pub(crate) fn pace(
    start: Instant,
    rate: f64,
    total: Option<u64>,
    publishers: Vec<mpsc::UnboundedSender<u64>>,
    shared: &Shared,
) {
    let interval = 1.0 / rate;
    let spin = Duration::from_micros(100);
    let mut i: u64 = 0;
    loop {
        if shared.stop.load(Ordering::Relaxed) || total.is_some_and(|n| i >= n) {
            break;
        }
        let intended = start + Duration::from_secs_f64(i as f64 * interval);
        let now = Instant::now();
        if intended > now + spin {
            std::thread::sleep(intended - now - spin);
        }
        while Instant::now() < intended {
            std::hint::spin_loop();
        }
        let publisher = &publishers[(i % publishers.len() as u64) as usize];
        if publisher.send(payload::ns_since_epoch(intended)).is_err() {
            break; // that publisher is gone (failed); it reports why
        }
        i += 1;
    }
}
