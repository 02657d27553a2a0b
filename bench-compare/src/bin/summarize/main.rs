//! `summarize DIR`: reads the `latency` results that `bench-compare/run.sh`
//! wrote into DIR (`<leg>-<scenario>-<client>.json`, plus `machine.json`) and
//! prints a markdown summary on stdout: one table per scenario (median and
//! min-max over trials of p50, p99, p99.9, blast publish / drain / total and
//! RSS) and the ratios of every ramqp leg against RabbitMQ for the same
//! scenario and client. With the `charts` feature it also writes SVG bar
//! charts (`chart-latency-p50.svg`, `chart-blast-total.svg`) into DIR.
//! The `rig` results (`rig-<leg>-<queue>-<client>.json`) get throughput
//! tables of their own (`rig.rs`). `summarize depth FILE.json ...` charts
//! and tabulates `depth` results instead (`depth_chart.rs`, `svg.rs`).

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

#[cfg(feature = "charts")]
mod charts;
mod depth_chart;
mod rig;
mod svg;

/// Legs in table order, with the label shown.
const LEGS: [(&str, &str); 3] = [
    ("inproc", "ramqp in-process"),
    ("brokerd", "ramqp-brokerd"),
    ("rabbitmq", "RabbitMQ 3.10"),
];
/// Scenarios in table order, with the heading shown.
const SCENARIOS: [(&str, &str); 3] = [
    ("pre", "Transient / classic queue, pre-settled publishes"),
    ("confirm", "Transient / classic queue, confirmed publishes"),
    ("quorum", "Quorum queue, confirmed publishes"),
];
const CLIENTS: [&str; 2] = ["raw", "fe2o3"];
/// The leg every ratio is taken against.
const BASELINE: &str = "rabbitmq";

/// Median, min and max over trials, as the `latency` bin reports them.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn from(v: &Value) -> Option<Spread> {
        Some(Spread {
            median: v.get("median")?.as_f64()?,
            min: v.get("min")?.as_f64()?,
            max: v.get("max")?.as_f64()?,
        })
    }

    fn scaled(self, k: f64) -> Spread {
        Spread {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
        }
    }
}

/// The figures of one result file.
#[derive(Debug, Default)]
struct Row {
    p50: Option<Spread>,
    p99: Option<Spread>,
    p99_9: Option<Spread>,
    publish: Option<Spread>,
    drain: Option<Spread>,
    total: Option<Spread>,
    rss_mib: Option<Spread>,
    trials: u64,
    samples: u64,
    blast_n: u64,
    close_errors: usize,
    client: String,
    target: String,
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .filter(|v| !v.is_null())
}

fn row(v: &Value) -> Row {
    let spread = |path: &[&str]| at(v, path).and_then(Spread::from);
    let close_errors = v
        .get("trials")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t.get("close_errors").and_then(Value::as_array))
                .map(Vec::len)
                .sum()
        })
        .unwrap_or(0);
    let target = at(v, &["target", "broker"])
        .or_else(|| at(v, &["target", "kind"]))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    Row {
        p50: spread(&["percentiles_us", "p50"]),
        p99: spread(&["percentiles_us", "p99"]),
        p99_9: spread(&["percentiles_us", "p99_9"]),
        publish: spread(&["throughput_msg_s", "publish"]),
        drain: spread(&["throughput_msg_s", "drain"]),
        total: spread(&["throughput_msg_s", "total"]),
        rss_mib: spread(&["rss_kib"]).map(|s| s.scaled(1.0 / 1024.0)),
        trials: v.get("trials_n").and_then(Value::as_u64).unwrap_or(0),
        samples: v.get("samples").and_then(Value::as_u64).unwrap_or(0),
        blast_n: v.get("blast_n").and_then(Value::as_u64).unwrap_or(0),
        close_errors,
        client: v
            .get("client")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string(),
        target,
    }
}

/// `median (min-max)`, or just the median for a single trial.
fn fmt_spread(s: Option<Spread>, decimals: usize) -> String {
    match s {
        None => "n/a".to_string(),
        Some(s) if s.min == s.max => format!("{:.*}", decimals, s.median),
        Some(s) => format!(
            "{:.*} ({:.*}-{:.*})",
            decimals, s.median, decimals, s.min, decimals, s.max
        ),
    }
}

/// Latencies in µs: one decimal below 100 µs, none above.
fn fmt_us(s: Option<Spread>) -> String {
    fmt_spread(
        s,
        if s.is_some_and(|s| s.median < 100.0) {
            1
        } else {
            0
        },
    )
}

fn ratio(ours: Option<Spread>, base: Option<Spread>) -> String {
    match (ours, base) {
        (Some(o), Some(b)) if b.median > 0.0 => format!("{:.2}x", o.median / b.median),
        _ => "n/a".to_string(),
    }
}

type Results = BTreeMap<(String, String, String), Row>;

/// The files in `dir`, sorted, as (path, stem split at '-', extension).
fn result_files(dir: &Path) -> Result<Vec<(PathBuf, Vec<String>, String)>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries
        .into_iter()
        .filter_map(|path| {
            let stem = path.file_stem()?.to_str()?;
            let parts = stem.split('-').map(str::to_string).collect();
            let ext = path.extension()?.to_str()?.to_string();
            Some((path, parts, ext))
        })
        .collect())
}

/// A run without its JSON (or with one that does not parse) failed.
fn failed_run(path: &Path, ext: &str) -> bool {
    ext == "err" && !path.with_extension("json").exists()
}

fn load(dir: &Path) -> Result<(Results, Vec<String>)> {
    let mut results = Results::new();
    let mut failed = Vec::new();
    for (path, parts, ext) in result_files(dir)? {
        let stem = parts.join("-");
        let [leg, scenario, client] = &parts[..] else {
            continue;
        };
        let key = (leg.to_string(), scenario.to_string(), client.to_string());
        if ext == "json" {
            let text = std::fs::read_to_string(&path)?;
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => {
                    results.insert(key, row(&v));
                }
                Err(_) => failed.push(stem),
            }
        } else if failed_run(&path, &ext) {
            failed.push(stem);
        }
    }
    Ok((results, failed))
}

fn machine_section(dir: &Path, out: &mut String) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(dir.join("machine.json")) else {
        writeln!(out, "(no machine.json)\n")?;
        return Ok(());
    };
    let m: Value = serde_json::from_str(&text).context("machine.json")?;
    let s = |k: &str| match m.get(k) {
        None | Some(Value::Null) => "n/a".to_string(),
        Some(Value::String(s)) if s.is_empty() => "n/a".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    writeln!(out, "| machine | |\n|---|---|")?;
    writeln!(out, "| run (UTC) | {} |", s("timestamp"))?;
    writeln!(
        out,
        "| commit | `{}` (dirty: {}) |",
        s("git_commit"),
        s("git_dirty")
    )?;
    writeln!(
        out,
        "| CPU | {}, {} logical CPUs |",
        s("cpu_model"),
        s("logical_cpus")
    )?;
    writeln!(out, "| kernel | {} |", s("kernel"))?;
    writeln!(out, "| memory | {} KiB |", s("mem_total_kib"))?;
    writeln!(out, "| disks (lsblk) | {} |", s("disks"))?;
    writeln!(out, "| results filesystem (df) | {} |", s("results_fs"))?;
    writeln!(
        out,
        "| fsync'd 256 B append | {} µs ({}) |",
        s("fsync_append_256b_us"),
        s("fsync_method")
    )?;
    writeln!(
        out,
        "| the same, 3 writers at once (3 files) | {} µs |",
        s("fsync_append_256b_3_concurrent_us")
    )?;
    writeln!(
        out,
        "| loopback RTT | {} µs ({}) |",
        s("loopback_rtt_us"),
        s("loopback_rtt_method")
    )?;
    writeln!(
        out,
        "| rabbitmq-server package | {} |",
        s("rabbitmq_server")
    )?;
    writeln!(
        out,
        "| mode | quick: {}, trials: {}, sizes: {} |\n",
        s("quick"),
        s("trials"),
        s("size_flags")
    )?;
    Ok(())
}

fn summarize(dir: &Path) -> Result<String> {
    let (results, mut failed) = load(dir)?;
    let (rigs, rig_failed) = rig::load(dir)?;
    failed.extend(rig_failed);
    if results.is_empty() && failed.is_empty() && rigs.is_empty() {
        bail!(
            "no <leg>-<scenario>-<client>.json or rig-*.json results in {}",
            dir.display()
        );
    }
    let mut out = String::new();
    writeln!(out, "# Latency and blast: ramqp vs RabbitMQ 3.10\n")?;
    writeln!(
        out,
        "Generated by `bench-compare/run.sh` (`summarize`) from the JSON files next to \
         this one. Cells are the median over trials, with (min-max) when there was more \
         than one trial. Latency: closed loop, one message in flight, publish to \
         delivery (with confirms: including the `accepted`). Blast: N messages published \
         as fast as possible (confirmed ones with 1,000 in flight), then drained with \
         credit 1,000; total = N / (publish + drain time). RSS: in-process = the whole \
         bench process (broker + client); otherwise the broker process only.\n"
    )?;
    machine_section(dir, &mut out)?;

    for (scenario, heading) in SCENARIOS {
        let any = results.keys().any(|(_, s, _)| s == scenario);
        if !any {
            continue;
        }
        writeln!(out, "## {heading}\n")?;
        writeln!(
            out,
            "| leg | client | p50 µs | p99 µs | p99.9 µs | publish msg/s | drain msg/s | \
             total msg/s | RSS MiB | trials x samples / blast N |"
        )?;
        writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")?;
        for (leg, label) in LEGS {
            for client in CLIENTS {
                let key = (leg.to_string(), scenario.to_string(), client.to_string());
                let Some(r) = results.get(&key) else { continue };
                let warn = if r.close_errors > 0 {
                    format!(" ({} close warnings)", r.close_errors)
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "| {label} | {client} | {} | {} | {} | {} | {} | {} | {} | {} x {} / {}{warn} |",
                    fmt_us(r.p50),
                    fmt_us(r.p99),
                    fmt_us(r.p99_9),
                    fmt_spread(r.publish, 0),
                    fmt_spread(r.drain, 0),
                    fmt_spread(r.total, 0),
                    fmt_spread(r.rss_mib, 1),
                    r.trials,
                    r.samples,
                    r.blast_n,
                )?;
            }
        }
        writeln!(out)?;

        let mut ratios = String::new();
        for client in CLIENTS {
            let base = (
                BASELINE.to_string(),
                scenario.to_string(),
                client.to_string(),
            );
            let Some(b) = results.get(&base) else {
                continue;
            };
            for (leg, label) in LEGS.iter().filter(|(l, _)| *l != BASELINE) {
                let key = (leg.to_string(), scenario.to_string(), client.to_string());
                let Some(r) = results.get(&key) else { continue };
                writeln!(
                    ratios,
                    "| {label} | {client} | {} | {} | {} | {} | {} | {} | {} |",
                    ratio(r.p50, b.p50),
                    ratio(r.p99, b.p99),
                    ratio(r.p99_9, b.p99_9),
                    ratio(r.publish, b.publish),
                    ratio(r.drain, b.drain),
                    ratio(r.total, b.total),
                    ratio(r.rss_mib, b.rss_mib),
                )?;
            }
        }
        if !ratios.is_empty() {
            writeln!(
                out,
                "Against RabbitMQ, same client (ratio of medians; latency and RSS: below 1 \
                 is better, throughput: above 1 is better):\n"
            )?;
            writeln!(
                out,
                "| leg | client | p50 | p99 | p99.9 | publish | drain | total | RSS |"
            )?;
            writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|")?;
            writeln!(out, "{ratios}")?;
        }
    }

    rig::section(&rigs, &mut out)?;

    let mut stacks: Vec<String> = results
        .values()
        .map(|r| format!("{} -> {}", r.client, r.target))
        .chain(rig::stacks(&rigs))
        .collect();
    stacks.sort();
    stacks.dedup();
    writeln!(out, "## Client and broker stacks\n")?;
    for s in stacks {
        writeln!(out, "- {s}")?;
    }
    writeln!(out)?;
    if !failed.is_empty() {
        writeln!(out, "## Failed or missing runs\n")?;
        for f in &failed {
            writeln!(out, "- `{f}` (see `{f}.err`)")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "## Read this as\n\n\
         A side-by-side run on one shared machine (see the CPU count above): compare the \
         rows of one table, not absolute numbers across runs. The in-process leg shares \
         the cores between broker and client in one process; the ramqp-brokerd and \
         RabbitMQ legs run the broker in its own process over loopback, which is the \
         like-for-like comparison. `raw` is the bench's minimal AMQP 1.0 client on \
         ramqp's codec, `fe2o3` is fe2o3-amqp; the same client is used against every \
         broker. A quick-mode run (few samples, one trial) is a smoke test, not a \
         measurement."
    )?;
    #[cfg(feature = "charts")]
    {
        let written = charts::write(dir, &results)?;
        if !written.is_empty() {
            writeln!(out, "\nCharts: {}", written.join(", "))?;
        }
    }
    Ok(out)
}

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.next_if(|a| a == "depth").is_some() {
        return depth_chart::main(args);
    }
    let dir = args.next().map(PathBuf::from).context(
        "usage: summarize RESULTS_DIR | summarize depth [--help] FILE.json ...  (markdown on stdout)",
    )?;
    print!("{}", summarize(&dir)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_formatting() {
        let s = Spread {
            median: 1234.4,
            min: 1000.0,
            max: 1500.6,
        };
        assert_eq!(fmt_us(Some(s)), "1234 (1000-1501)");
        let one = Spread {
            median: 42.25,
            min: 42.25,
            max: 42.25,
        };
        assert_eq!(fmt_us(Some(one)), "42.2");
        assert_eq!(fmt_us(None), "n/a");
        assert_eq!(ratio(Some(one), Some(s)), "0.03x");
    }

    #[test]
    fn row_reads_latency_json() {
        let v: Value = serde_json::json!({
            "percentiles_us": {"p50": {"median": 10.0, "min": 9.0, "max": 11.0}},
            "throughput_msg_s": null,
            "rss_kib": {"median": 2048.0, "min": 1024.0, "max": 4096.0},
            "trials": [{"close_errors": ["x"]}, {"close_errors": []}],
            "trials_n": 2, "samples": 500, "blast_n": 0,
            "target": {"broker": "b"}, "client": "c"
        });
        let r = row(&v);
        assert_eq!(r.p50.map(|s| s.median), Some(10.0));
        assert!(r.total.is_none());
        assert_eq!(r.rss_mib.map(|s| s.median), Some(2.0));
        assert_eq!(r.close_errors, 1);
        assert_eq!(r.target, "b");
    }
}
