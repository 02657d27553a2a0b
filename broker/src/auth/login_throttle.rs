//! Slowing down failed logins: each failure from a source address makes
//! that address wait longer before it hears the outcome (doubling from
//! [`BASE_DELAY`] up to [`MAX_DELAY`]), so passwords cannot be tried at
//! wire speed. Memory is bounded: at most [`TRACKED_MAX`] addresses are
//! remembered, quiet ones are forgotten after [`FORGET_AFTER`], and an
//! address that finds the table full waits the longest delay.
//!
//! Knows nothing of SASL: addresses in, delays out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The delay after a first failure.
pub const BASE_DELAY: Duration = Duration::from_millis(200);
/// The longest delay (kept well under the handshake time-out, so an
/// honest client that mistyped still hears why it failed).
pub const MAX_DELAY: Duration = Duration::from_secs(4);
/// An address without failures for this long starts from scratch.
pub const FORGET_AFTER: Duration = Duration::from_secs(300);
/// Most addresses remembered at once.
pub const TRACKED_MAX: usize = 16_384;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last: Instant,
}

/// Failed logins by source address, and their count.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    entries: Mutex<HashMap<IpAddr, Entry>>,
    failures_total: AtomicU64,
}

fn delay_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BASE_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

impl LoginThrottle {
    /// Record a failed login from `source`; how long to wait before the
    /// failure is answered.
    pub fn failed(&self, source: IpAddr) -> Duration {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= TRACKED_MAX && !entries.contains_key(&source) {
            entries.retain(|_, e| now.duration_since(e.last) < FORGET_AFTER);
            if entries.len() >= TRACKED_MAX {
                return MAX_DELAY;
            }
        }
        let entry = entries.entry(source).or_insert(Entry {
            failures: 0,
            last: now,
        });
        if now.duration_since(entry.last) >= FORGET_AFTER {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last = now;
        delay_after(entry.failures)
    }

    /// A successful login from `source` clears its record.
    pub fn succeeded(&self, source: IpAddr) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(&source);
    }

    /// Failed logins since start.
    pub fn failures_total(&self) -> u64 {
        self.failures_total.load(Ordering::Relaxed)
    }

    /// Addresses remembered now.
    pub fn tracked(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_per_failure_up_to_the_cap() {
        let throttle = LoginThrottle::default();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert_eq!(throttle.failed(a), BASE_DELAY);
        assert_eq!(throttle.failed(a), BASE_DELAY * 2);
        assert_eq!(throttle.failed(a), BASE_DELAY * 4);
        // Another address is not slowed by a's failures.
        assert_eq!(throttle.failed(b), BASE_DELAY);
        for _ in 0..40 {
            throttle.failed(a);
        }
        assert_eq!(throttle.failed(a), MAX_DELAY);
        throttle.succeeded(a);
        assert_eq!(throttle.failed(a), BASE_DELAY);
        assert_eq!(throttle.failures_total(), 46);
    }

    #[test]
    fn memory_is_bounded_and_a_full_table_gets_the_longest_delay() {
        let throttle = LoginThrottle::default();
        for i in 0..TRACKED_MAX as u32 {
            throttle.failed(IpAddr::from(i.to_be_bytes()));
        }
        assert_eq!(throttle.tracked(), TRACKED_MAX);
        let newcomer: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(throttle.failed(newcomer), MAX_DELAY);
        assert_eq!(throttle.tracked(), TRACKED_MAX);
    }
}
