//! Result plumbing shared by the bins: latency histograms and their
//! percentiles, median/min/max over trials, and the context every result
//! carries (client stack, git commit, machine, timestamp). Results go to
//! stdout as one JSON object; the human summary goes to stderr.

use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The client stack that produced every number.
pub fn client_stack() -> String {
    format!(
        "fe2o3-amqp {} (tokio {})",
        env!("BENCH_FE2O3_VERSION"),
        env!("BENCH_TOKIO_VERSION")
    )
}

/// The stack of a bin's `--client` choice: `raw` (the bench's own client,
/// [`crate::raw`]) or anything else (fe2o3-amqp, [`client_stack`]).
pub fn client_stack_of(client: &str) -> String {
    if client == "raw" {
        crate::raw::client_stack()
    } else {
        client_stack()
    }
}

/// A latency histogram in nanoseconds, 1 ns to 10 min, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid histogram bounds")
}

/// The samples of a closed-loop run, one message in flight: publish to
/// delivery for each round and, with confirms, publish to `accepted`.
/// Warm-up rounds are checked but not recorded.
pub struct ClosedLoop {
    warmup: u64,
    confirm: bool,
    delivered: Histogram<u64>,
    accepted: Histogram<u64>,
}

impl ClosedLoop {
    pub fn new(warmup: u64, confirm: bool) -> ClosedLoop {
        ClosedLoop {
            warmup,
            confirm,
            delivered: histogram(),
            accepted: histogram(),
        }
    }

    /// Round `seq`, published at `start`, settled by the broker at
    /// `sent_at` (right after the publish when not confirming), delivered
    /// (as message `delivered_seq`) at `at`. Another message than `seq`
    /// fails the run: the broker duplicated or reordered.
    pub fn record(
        &mut self,
        seq: u64,
        delivered_seq: u64,
        start: Instant,
        sent_at: Instant,
        at: Instant,
    ) -> Result<()> {
        if delivered_seq != seq {
            bail!(
                "closed loop: expected message #{seq}, the broker delivered #{delivered_seq} (duplicate or reordered delivery)"
            );
        }
        if seq < self.warmup {
            return Ok(());
        }
        let nanos = at.duration_since(start).as_nanos() as u64;
        self.delivered
            .record(nanos.max(1))
            .map_err(|e| anyhow!("record a latency sample: {e}"))?;
        if self.confirm {
            let nanos = sent_at.duration_since(start).as_nanos() as u64;
            self.accepted
                .record(nanos.max(1))
                .map_err(|e| anyhow!("record a confirm sample: {e}"))?;
        }
        Ok(())
    }

    /// Publish-to-delivery percentiles, and publish-to-accepted ones with
    /// confirms.
    pub fn percentiles(&self) -> (Percentiles, Option<Percentiles>) {
        (
            Percentiles::of(&self.delivered),
            self.confirm.then(|| Percentiles::of(&self.accepted)),
        )
    }
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p99_9: f64,
    /// Largest.
    pub max: f64,
}

/// `x` rounded to one decimal, for rates and durations in results.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn us(ns: f64) -> f64 {
    (ns / 100.0).round() / 10.0
}

impl Percentiles {
    /// From a histogram recorded in nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min: us(h.min() as f64),
            mean: us(h.mean()),
            p50: us(h.value_at_quantile(0.50) as f64),
            p90: us(h.value_at_quantile(0.90) as f64),
            p99: us(h.value_at_quantile(0.99) as f64),
            p99_9: us(h.value_at_quantile(0.999) as f64),
            max: us(h.max() as f64),
        }
    }

    /// "p50 / p90 / p99 / p99.9 / max" for the human summary.
    pub fn line(&self) -> String {
        format!(
            "p50 {:.1} / p90 {:.1} / p99 {:.1} / p99.9 {:.1} / max {:.1} µs ({} samples)",
            self.p50, self.p90, self.p99, self.p99_9, self.max, self.count
        )
    }
}

/// Median with the min..max spread of one metric over trials.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Spread {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Over `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }

    /// "median (min-max)" for the human summary.
    pub fn line(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}-{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }
}

/// `{metric: {median, min, max}}` for every numeric leaf at `paths` across
/// trial objects (paths are JSON pointers such as `/latency_us/p50`).
pub fn summarize(trials: &[Value], paths: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for path in paths {
        let values: Vec<f64> = trials
            .iter()
            .filter_map(|t| t.pointer(path).and_then(Value::as_f64))
            .collect();
        let key = path.trim_start_matches('/').replace('/', ".");
        out.insert(key, Spread::of(&values).map_or(Value::Null, |s| json!(s)));
    }
    Value::Object(out)
}

/// `git rev-parse HEAD` of the source tree, and whether it had changes.
pub fn git_commit() -> (Option<String>, Option<bool>) {
    let dir = env!("CARGO_MANIFEST_DIR");
    let commit = Command::new("git")
        .args(["-C", dir, "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let dirty = Command::new("git")
        .args(["-C", dir, "status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty());
    (commit, dirty)
}

/// CPU, cores, kernel and memory of this machine.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    let mem_total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    });
    let cores = std::thread::available_parallelism().map(|n| n.get()).ok();
    json!({
        "cpu": cpu,
        "logical_cpus": cores,
        "kernel": kernel,
        "mem_total_kib": mem_total_kib,
    })
}

/// Now as an RFC 3339 UTC timestamp, and as Unix milliseconds.
pub fn timestamp() -> (String, u64) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let text = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    );
    (text, since.as_millis() as u64)
}

/// The fields every result object starts with.
pub fn context(bench: &str, scenario: &str, target: Value) -> serde_json::Map<String, Value> {
    let (commit, dirty) = git_commit();
    let (timestamp, unix_ms) = timestamp();
    let mut map = serde_json::Map::new();
    map.insert("bench".into(), json!(bench));
    map.insert("scenario".into(), json!(scenario));
    map.insert("target".into(), target);
    map.insert("client".into(), json!(client_stack()));
    map.insert("git_commit".into(), json!(commit));
    map.insert("git_dirty".into(), json!(dirty));
    map.insert("timestamp".into(), json!(timestamp));
    map.insert("unix_ms".into(), json!(unix_ms));
    map.insert("machine".into(), machine());
    map
}

/// Print the result object on stdout as one line of JSON.
pub fn emit(result: &Value) -> Result<()> {
    println!("{}", serde_json::to_string(result)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_median_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).expect("values");
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).expect("values");
        assert_eq!(s.median, 2.5);
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn timestamp_is_rfc3339() {
        let (text, ms) = timestamp();
        assert_eq!(text.len(), 20);
        assert!(text.ends_with('Z'));
        assert!(ms > 1_600_000_000_000);
    }

    #[test]
    fn percentiles_in_microseconds() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("in range");
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.count, 1000);
        assert!((p.p50 - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.max - 1000.0).abs() < 1.0, "{p:?}");
    }
}
