//! CPU time used by the broker's processes and by the bench itself over a
//! phase (user + system, from /proc/PID/stat), so a rate can be read as
//! broker-bound or client-bound: a drain at 25% of one broker core is
//! waiting on something, not computing. It knows nothing of AMQP.

use serde::Serialize;

/// Linux reports utime and stime in USER_HZ ticks, 100 per second on every
/// architecture this bench runs on.
const TICKS_PER_SEC: f64 = 100.0;

/// CPU ticks of the watched pids and of this process at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuMark {
    broker: Option<u64>,
    bench: Option<u64>,
}

/// CPU seconds over a phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CpuUsed {
    /// Summed over the broker pids; `None` when one could not be read.
    pub(crate) broker_s: Option<f64>,
    /// This bench process (client side).
    pub(crate) bench_s: Option<f64>,
    /// broker_s / wall seconds of the phase (1.0 = one core busy).
    pub(crate) broker_cores: Option<f64>,
    /// bench_s / wall seconds of the phase.
    pub(crate) bench_cores: Option<f64>,
}

/// utime + stime of one process, in ticks.
fn ticks(stat_path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the man page, utime 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

impl CpuMark {
    /// Read now. An empty `pids` (the in-process broker) leaves the broker
    /// part unknown: its CPU is the bench's own.
    pub(crate) fn now(pids: &[u32]) -> CpuMark {
        let broker = if pids.is_empty() {
            None
        } else {
            pids.iter()
                .map(|pid| ticks(&format!("/proc/{pid}/stat")))
                .sum::<Option<u64>>()
        };
        CpuMark {
            broker,
            bench: ticks("/proc/self/stat"),
        }
    }

    /// What was used from `self` to `later`, over `wall_s` seconds.
    pub(crate) fn used_until(&self, later: &CpuMark, wall_s: f64) -> CpuUsed {
        let secs =
            |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?) as f64 / TICKS_PER_SEC);
        let broker_s = secs(self.broker, later.broker);
        let bench_s = secs(self.bench, later.bench);
        let share = |s: Option<f64>| {
            s.filter(|_| wall_s > 0.0)
                .map(|s| (s / wall_s * 100.0).round() / 100.0)
        };
        CpuUsed {
            broker_s,
            bench_s,
            broker_cores: share(broker_s),
            bench_cores: share(bench_s),
        }
    }
}

impl CpuUsed {
    /// "broker 0.25 cores, bench 0.90 cores" (unknown parts left out).
    pub(crate) fn line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.broker_cores {
            parts.push(format!("broker {c:.2} cores"));
        }
        if let Some(c) = self.bench_cores {
            parts.push(format!("bench {c:.2} cores"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_a_busy_loop_shows() {
        let before = CpuMark::now(&[std::process::id()]);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let after = CpuMark::now(&[std::process::id()]);
        let used = before.used_until(&after, start.elapsed().as_secs_f64());
        let bench = used.bench_s.expect("own /proc/self/stat");
        assert!(bench >= 0.1, "a 300 ms busy loop used {bench} s");
        // The same process read through two paths at two moments: the
        // other test threads may add a tick or two between the reads.
        let broker = used.broker_s.expect("own /proc/PID/stat");
        assert!(
            (broker - bench).abs() <= 0.05,
            "broker {broker} s, bench {bench} s"
        );
    }
}
