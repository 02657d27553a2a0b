//! [`LatencyHistogram`]: durations counted into fixed buckets with relaxed
//! atomics, cheap enough for a hot path (one clock read on each side of the
//! timed step, three atomic adds). It knows nothing of what it times; the
//! metrics endpoint (`crate::http`) reads [`LatencyHistogram::snapshot`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (the last, +Inf, is implied):
/// from 100 µs to 10 s, about 2.5x apart.
pub const LATENCY_BUCKETS_SECONDS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
];

/// Counts of durations per bucket, with their sum.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Per bucket of [`LATENCY_BUCKETS_SECONDS`] (not cumulative), and one
    /// more for the durations above the last bound.
    buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

/// A copy of a [`LatencyHistogram`] at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySnapshot {
    /// Sum of every duration, in seconds.
    pub sum_seconds: f64,
    /// Durations counted.
    pub count: u64,
    /// `(upper bound in seconds, durations above the bound before it and
    /// at or below this one)`: per bucket, not cumulative; the last bound
    /// is `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
}

impl LatencyHistogram {
    /// Count one duration.
    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        if let Some(slot) = self.buckets.get(bucket) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now (each exact; taken while durations are counted, the
    /// sum and the buckets may differ by the ones in flight).
    pub fn snapshot(&self) -> LatencySnapshot {
        let bounds = LATENCY_BUCKETS_SECONDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY));
        let buckets = bounds
            .zip(&self.buckets)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        LatencySnapshot {
            sum_seconds: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)).as_secs_f64(),
            count: self.count.load(Ordering::Relaxed),
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_their_buckets() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets.len(), LATENCY_BUCKETS_SECONDS.len() + 1);
        assert_eq!(s.buckets[0], (0.0001, 1));
        // 3 ms is in the 5 ms bucket (index 5).
        assert_eq!(s.buckets[4].1, 0);
        assert_eq!(s.buckets[5], (0.005, 1));
        assert_eq!(s.buckets.last().copied(), Some((f64::INFINITY, 1)));
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 3);
        assert!(
            (s.sum_seconds - 60.003_05).abs() < 1e-6,
            "{}",
            s.sum_seconds
        );
    }
}
