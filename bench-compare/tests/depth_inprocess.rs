//! The `depth` bin end to end on its in-process broker with tiny
//! checkpoints: the JSON has one row per checkpoint with the depth each
//! probe adds accounted for, the drain returns exactly the published
//! total, the RSS figures are those of a live process, and the bin removes
//! its temporary data dir. Each run is bounded by `timeout(1)`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Longest a run may take; a broker that hangs fails the test here.
const LIMIT_SECS: &str = "50";

fn run_depth(address: &str, tag: &str) -> Value {
    let work: PathBuf =
        std::env::temp_dir().join(format!("depth-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("create the work dir");
    let output = Command::new("timeout")
        .arg(LIMIT_SECS)
        .arg(env!("CARGO_BIN_EXE_depth"))
        .args(["--address", address])
        .args(["--checkpoints", "0,200,500"])
        .args(["--size", "64", "--probe", "20", "--window", "100"])
        .args(["--settle-secs", "1", "--timeout-ms", "10000"])
        .arg("--work-dir")
        .arg(&work)
        .env_remove("DEPTH_URL")
        .output()
        .expect("run the depth bin");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let leftovers = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&work);
    assert!(output.status.success(), "depth failed: {stderr}");
    assert_eq!(leftovers, 0, "the bin left files in its work dir");
    let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one JSON object on stdout: {stdout}"
    );
    serde_json::from_str(lines[0]).expect("stdout is JSON")
}

fn check(result: &Value, address: &str) {
    for field in [
        "bench",
        "scenario",
        "target",
        "client",
        "git_commit",
        "timestamp",
        "machine",
    ] {
        assert!(result.get(field).is_some(), "missing {field}: {result}");
    }
    assert_eq!(result["bench"], "depth");
    assert_eq!(result["target"]["address"], address);
    let rows = result["checkpoints"].as_array().expect("checkpoint rows");
    assert_eq!(rows.len(), 3);
    // Fill to 0, probe 20 -> 20; fill 180 -> 200, probe -> 220; fill 280 -> 500, probe -> 520.
    let expected = [(0, 0, 20), (200, 180, 220), (500, 280, 520)];
    let mem_kib = result["machine"]["mem_total_kib"]
        .as_u64()
        .unwrap_or(u64::MAX);
    for (row, (checkpoint, filled, after_probe)) in rows.iter().zip(expected) {
        assert_eq!(row["checkpoint"], checkpoint, "{row}");
        assert_eq!(row["depth"], checkpoint, "{row}");
        assert_eq!(row["fill"]["messages"], filled, "{row}");
        assert_eq!(row["depth_after_probe"], after_probe, "{row}");
        assert_eq!(row["probe_us"]["count"], 20, "{row}");
        let p50 = row["probe_us"]["p50"].as_f64().expect("p50");
        let max = row["probe_us"]["max"].as_f64().expect("max");
        assert!(p50 > 0.0 && p50 <= max, "{row}");
        let rss = row["rss_kib"].as_u64().expect("rss");
        assert!(rss > 4 * 1024 && rss < mem_kib, "RSS {rss} KiB: {row}");
        assert!(row["data_dir_bytes"].as_u64().is_some(), "{row}");
        if filled > 0 {
            assert!(
                row["fill"]["msg_s"].as_f64().is_some_and(|r| r > 0.0),
                "{row}"
            );
        }
    }
    assert_eq!(result["published_total"], 520);
    assert_eq!(result["drain"]["received"], 520);
    assert_eq!(result["drain"]["missing"], 0);
    assert_eq!(result["drain"]["duplicates"], 0);
    assert!(result["drain"]["msg_s"].as_f64().is_some_and(|r| r > 0.0));
    let after = result["after_drain"]["rss_kib"]
        .as_u64()
        .expect("rss after the drain");
    assert!(after > 4 * 1024 && after < mem_kib);
    assert_eq!(result["ok"], true);
    assert!(result["recovery"].is_null());
}

#[test]
fn depth_quorum_queue_in_process() {
    let result = run_depth("/quorum/depth", "quorum");
    check(&result, "/quorum/depth");
    // The quorum queue's log is on disk.
    let data = result["checkpoints"][2]["data_dir_bytes"]
        .as_u64()
        .unwrap_or(0);
    assert!(data > 520 * 64, "data dir {data} B for 520 x 64 B messages");
}

#[test]
fn depth_transient_queue_in_process() {
    let result = run_depth("/queues/depth", "transient");
    check(&result, "/queues/depth");
    // The in-process broker reports its queue's depth: the bench's count.
    for row in result["checkpoints"].as_array().expect("rows") {
        assert_eq!(row["broker_reported_depth"], row["depth"], "{row}");
    }
}
