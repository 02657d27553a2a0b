//! The throughput sections of the summary: every `rig-<leg>-<queue>-<client>.json`
//! that `run.sh` wrote (the `rig` bin's JSON, from either client stack), one
//! row per (leg, client, body size): published and delivered rates (median,
//! min-max over trials), latency p50 / p99 and peak RSS, with a growing
//! queue called out; and the same for `rate-...json`, the rig's open loop
//! at a fixed rate, whose latency counts from the intended send time.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use super::{failed_run, fmt_spread, fmt_us, result_files, Spread, LEGS};

/// The cluster's paths (`bench-compare/cluster.sh`), after [`LEGS`].
const CLUSTER_LEGS: [(&str, &str); 2] = [
    ("clusterleader", "ramqp 3-node cluster, via the leader"),
    ("clusterfollower", "ramqp 3-node cluster, via a follower"),
];

/// (file prefix, queue kind, heading) in table order.
const SECTIONS: [(&str, &str, &str); 4] = [
    (
        "rig",
        "transient",
        "Throughput (`rig`), transient / classic queue",
    ),
    ("rig", "quorum", "Throughput (`rig`), quorum queue"),
    (
        "rate",
        "transient",
        "Fixed rate (`rig --rate`, open loop), transient / classic queue",
    ),
    (
        "rate",
        "quorum",
        "Fixed rate (`rig --rate`, open loop), quorum queue",
    ),
];

/// One rig result file.
pub(crate) struct RigFile {
    /// `rig` (as fast as the window allows) or `rate` (open loop).
    kind: String,
    leg: String,
    queue: String,
    client: String,
    value: Value,
}

/// The rig results in `dir` and the names of failed rig runs.
pub(crate) fn load(dir: &Path) -> Result<(Vec<RigFile>, Vec<String>)> {
    let mut files = Vec::new();
    let mut failed = Vec::new();
    for (path, parts, ext) in result_files(dir)? {
        let stem = parts.join("-");
        let [kind @ ("rig" | "rate"), leg, queue, client] =
            parts.iter().map(String::as_str).collect::<Vec<_>>()[..]
        else {
            continue;
        };
        if ext == "json" {
            let parsed = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
            match parsed {
                Some(value) => files.push(RigFile {
                    kind: kind.to_string(),
                    leg: leg.to_string(),
                    queue: queue.to_string(),
                    client: client.to_string(),
                    value,
                }),
                None => failed.push(stem),
            }
        } else if failed_run(&path, &ext) {
            failed.push(stem);
        }
    }
    Ok((files, failed))
}

/// "client -> broker" of every rig result.
pub(crate) fn stacks(files: &[RigFile]) -> Vec<String> {
    files
        .iter()
        .map(|f| {
            let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_string();
            let target = f.value.get("target");
            let broker = target
                .and_then(|t| t.get("broker"))
                .filter(|b| !b.is_null())
                .or_else(|| target.and_then(|t| t.get("kind")));
            format!("{} -> {}", s(f.value.get("client")), s(broker))
        })
        .collect()
}

/// The markdown tables, one per queue kind present.
pub(crate) fn section(files: &[RigFile], out: &mut String) -> Result<()> {
    for (kind, queue, heading) in SECTIONS {
        let mine: Vec<&RigFile> = files
            .iter()
            .filter(|f| f.kind == kind && f.queue == queue)
            .collect();
        let Some(first) = mine.first() else { continue };
        let v = &first.value;
        let num = |k: &str| v.get(k).map_or("n/a".to_string(), Value::to_string);
        writeln!(out, "## {heading}\n")?;
        let pace = match v.get("rate_msg_s").and_then(Value::as_f64) {
            Some(rate) => format!(
                "open loop at {rate} msg/s; latency from the intended send time (a stall \
                 counts in full)"
            ),
            None => "latency from the send time (closed loop: mostly time spent queued)".into(),
        };
        writeln!(
            out,
            "{} publisher(s) x window {} ({}), {} consumer(s) x credit {}, {} trial(s); \
             duration {} s after {} s warm-up; {pace}.\n",
            num("publishers"),
            num("window"),
            v.get("publish").and_then(Value::as_str).unwrap_or("?"),
            num("consumers"),
            num("credit"),
            num("trials_n"),
            num("duration_secs"),
            num("warmup_secs"),
        )?;
        writeln!(
            out,
            "| leg | client | body B | published msg/s | delivered msg/s | p50 µs | p99 µs | \
             peak RSS MiB | |"
        )?;
        writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---|")?;
        for (leg, label) in LEGS.iter().chain(CLUSTER_LEGS.iter()) {
            for f in mine.iter().filter(|f| f.leg == *leg) {
                let Some(sizes) = f.value.get("summary").and_then(Value::as_array) else {
                    continue;
                };
                for s in sizes {
                    let spread = |k: &str| s.get(k).and_then(Spread::from);
                    let grew = s
                        .get("growing_queue_runs")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    writeln!(
                        out,
                        "| {label} | {} | {} | {} | {} | {} | {} | {} | {} |",
                        f.client,
                        s.get("body_bytes").map_or("?".into(), Value::to_string),
                        fmt_spread(spread("publish_msg_s"), 0),
                        fmt_spread(spread("deliver_msg_s"), 0),
                        fmt_us(spread("latency_us.p50")),
                        fmt_us(spread("latency_us.p99")),
                        fmt_spread(spread("rss_kib_peak").map(|s| s.scaled(1.0 / 1024.0)), 1),
                        if grew > 0 { "**queue grew**" } else { "" },
                    )?;
                }
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rig_rows_name_client_sizes_and_a_growing_queue() {
        let spread = |m: f64| serde_json::json!({"median": m, "min": m, "max": m});
        let value = serde_json::json!({
            "client": "ramqp-raw (broker::codec) 0.1.0 (tokio 1)",
            "target": {"kind": "in-process", "broker": "ramqp-broker 0.1.0 (in-process)"},
            "publish": "confirm", "publishers": 1, "consumers": 1, "window": 1000,
            "credit": 1000, "trials_n": 1, "duration_secs": 3.0, "warmup_secs": 1.0,
            "summary": [{
                "body_bytes": 256,
                "publish_msg_s": spread(200000.0),
                "deliver_msg_s": spread(150000.0),
                "latency_us.p50": spread(900.0),
                "latency_us.p99": spread(1500.0),
                "rss_kib_peak": spread(2048.0),
                "growing_queue_runs": 1
            }]
        });
        let files = vec![RigFile {
            kind: "rig".into(),
            leg: "inproc".into(),
            queue: "transient".into(),
            client: "raw".into(),
            value,
        }];
        let mut out = String::new();
        section(&files, &mut out).expect("section");
        assert!(out.contains("| ramqp in-process | raw | 256 | 200000 | 150000 | 900 | 1500 | 2.0 | **queue grew** |"), "{out}");
        assert!(!out.contains("quorum queue"));
        assert_eq!(
            stacks(&files),
            vec!["ramqp-raw (broker::codec) 0.1.0 (tokio 1) -> ramqp-broker 0.1.0 (in-process)"]
        );
    }

    #[test]
    fn fixed_rate_runs_get_their_own_open_loop_table() {
        let spread = |m: f64| serde_json::json!({"median": m, "min": m, "max": m});
        let value = serde_json::json!({
            "client": "ramqp-raw", "target": {"kind": "url", "broker": null},
            "publish": "confirm", "publishers": 1, "consumers": 1, "window": 1000,
            "credit": 1000, "trials_n": 3, "duration_secs": 10.0, "warmup_secs": 2.0,
            "rate_msg_s": 1000.0,
            "summary": [{
                "body_bytes": 256,
                "publish_msg_s": spread(1000.0),
                "deliver_msg_s": spread(1000.0),
                "latency_us.p50": spread(950.0),
                "latency_us.p99": spread(2100.0),
                "rss_kib_peak": spread(4096.0),
                "growing_queue_runs": 0
            }]
        });
        let files = vec![RigFile {
            kind: "rate".into(),
            leg: "brokerd".into(),
            queue: "quorum".into(),
            client: "raw".into(),
            value,
        }];
        let mut out = String::new();
        section(&files, &mut out).expect("section");
        assert!(
            out.contains("## Fixed rate (`rig --rate`, open loop), quorum queue"),
            "{out}"
        );
        assert!(out.contains("open loop at 1000 msg/s"), "{out}");
        assert!(out.contains("| 256 | 1000 | 1000 | 950 | 2100 |"), "{out}");
        assert!(!out.contains("## Throughput"), "{out}");
    }
}
