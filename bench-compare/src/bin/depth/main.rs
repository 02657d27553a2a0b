//! `depth`: how a broker behaves as ONE queue gets deep. The queue is
//! filled in stages to checkpoints (default 0 .. 2M messages) with
//! confirmed publishes pipelined (`--window` unsettled in flight); at each
//! checkpoint the bin records the broker's RSS and data-dir size, the
//! stage's fill rate and its longest gap between two accepts (a stall), and
//! closed-loop publish -> `accepted` latency at that depth (`--probe`
//! publishes, which deepen the queue and are counted). Then one consumer
//! drains it, checking that exactly the accepted messages come back, and
//! the footprint is re-sampled for a few seconds (a late compaction shows).
//! With `--recovery` the bench starts `ramqp-brokerd` itself, and instead of
//! the plain drain stops it (SIGTERM or SIGKILL), restarts it on the same
//! data dir and times the way back (`recovery.rs`). With `--rejoin` it
//! starts a 3-node cluster, fills the queue, wipes a follower's data dir
//! and watches its RSS while it catches up, then drains through it
//! (`rejoin.rs`).
//!
//! Publishing and consuming use the raw client (`src/raw/`), so the numbers
//! are the broker's. This file owns the flags, the order of the phases and
//! the result; it knows nothing of frames (fill.rs, drain.rs), of /proc
//! (footprint.rs) or of processes (child.rs).

mod catch_up;
mod child;
mod cluster;
mod cpu;
mod drain;
mod fill;
mod footprint;
mod progress;
mod recovery;
mod rejoin;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};

use ramqp_bench_compare::payload;
use ramqp_bench_compare::raw::{self, Connection, Receiver};
use ramqp_bench_compare::report;
use ramqp_bench_compare::target::{self, Target, TargetSpec};

use child::Brokerd;
use fill::Filler;
use footprint::{Footprint, Watched};
use progress::Progress;

/// Fill one queue in stages and measure the broker at each depth; then
/// drain it (or, with --recovery, restart the broker and drain it).
/// Flags override the DEPTH_* environment variables.
#[derive(Debug, Clone, Parser)]
#[command(name = "depth", version)]
struct Args {
    /// Broker URL (amqp://[user:pass@]host:port); unset: the in-process broker.
    #[arg(long, env = "DEPTH_URL", conflicts_with = "recovery")]
    url: Option<String>,
    /// Queue address (RabbitMQ 3.10: /amq/queue/NAME, declared beforehand).
    #[arg(long, env = "DEPTH_ADDRESS", default_value = "/quorum/depth")]
    address: String,
    /// Depths to stop at, ascending (k = 1,000, M = 1,000,000).
    #[arg(
        long,
        env = "DEPTH_CHECKPOINTS",
        default_value = "0,10k,100k,250k,500k,1M,2M"
    )]
    checkpoints: String,
    /// Body size in bytes (min 28, the bench header).
    #[arg(long, env = "DEPTH_SIZE", default_value_t = 256)]
    size: usize,
    /// Unsettled publishes in flight while filling.
    #[arg(long, env = "DEPTH_WINDOW", default_value_t = 1_000)]
    window: usize,
    /// Closed-loop publishes (one at a time, each waiting for `accepted`)
    /// at every checkpoint; they stay in the queue.
    #[arg(long, env = "DEPTH_PROBE", default_value_t = 2_000)]
    probe: u64,
    /// Credit window of the drain's consumer (kept topped up).
    #[arg(long, env = "DEPTH_CREDIT", default_value_t = 5_000)]
    credit: u32,
    /// A gap between two accepts longer than this counts as a stall (ms).
    #[arg(long, env = "DEPTH_STALL_MS", default_value_t = 50)]
    stall_ms: u64,
    /// Broker process ids whose VmRSS is summed (comma-separated, one per
    /// cluster node); the in-process broker uses the bench's own pid.
    #[arg(long, env = "DEPTH_PID", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Broker data directories whose file sizes are summed
    /// (comma-separated); the in-process broker uses its temp data dir.
    #[arg(long, env = "DEPTH_DATA_DIR", value_delimiter = ',')]
    data_dir: Vec<PathBuf>,
    /// After the drain, re-sample RSS and data-dir size for this long (s).
    #[arg(long, env = "DEPTH_SETTLE_SECS", default_value_t = 5)]
    settle_secs: u64,
    /// Longest wait for any single step (connect, accept, delivery), ms.
    #[arg(long, env = "DEPTH_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Stop the broker when full, restart it on the same data dir, time
    /// the way back to the first and the last delivery (needs --brokerd).
    #[arg(long, env = "DEPTH_RECOVERY", requires = "brokerd")]
    recovery: bool,
    /// The ramqp-brokerd binary that --recovery or --rejoin starts.
    #[arg(long, env = "DEPTH_BROKERD")]
    brokerd: Option<PathBuf>,
    /// Start a 3-node cluster, fill it, SIGKILL a follower of the queue,
    /// delete its data dir, restart it, sample its RSS until it caught up,
    /// move the leadership to it and drain through it (needs --brokerd).
    #[arg(long, env = "DEPTH_REJOIN", requires = "brokerd", conflicts_with_all = ["url", "recovery"])]
    rejoin: bool,
    /// ramqp-ctl for --rejoin (default: next to --brokerd).
    #[arg(long, env = "DEPTH_CTL")]
    ctl: Option<PathBuf>,
    /// --rejoin: node N's AMQP port is base+N-1, its fabric port base+10+N-1.
    #[arg(long, env = "DEPTH_BASE_PORT", default_value_t = 5900)]
    base_port: u16,
    /// --rejoin: the rejoined follower's RSS limit (MiB) for ok.
    #[arg(long, env = "DEPTH_RSS_LIMIT_MIB", default_value_t = 150)]
    rss_limit_mib: u64,
    /// --rejoin: how often its RSS is sampled (ms).
    #[arg(long, env = "DEPTH_SAMPLE_MS", default_value_t = 200)]
    sample_ms: u64,
    /// --rejoin: longest wait from its restart until it has caught up (s).
    #[arg(long, env = "DEPTH_CATCH_UP_LIMIT_SECS", default_value_t = 900)]
    catch_up_limit_secs: u64,
    /// --rejoin: copy the nodes' logs here before the work dir goes.
    #[arg(long, env = "DEPTH_KEEP_LOGS")]
    keep_logs: Option<PathBuf>,
    /// Stop with SIGKILL instead of SIGTERM in --recovery.
    #[arg(long, env = "DEPTH_KILL", requires = "recovery")]
    kill: bool,
    /// Longest time from the restart to the first delivery (s).
    #[arg(long, env = "DEPTH_RECOVERY_LIMIT_SECS", default_value_t = 300)]
    recovery_limit_secs: u64,
    /// Where the temporary data dirs and logs go (default: the system's
    /// temp dir); removed at the end.
    #[arg(long, env = "DEPTH_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Run the in-process broker on its own tokio runtime with this many
    /// worker threads (default: it shares the client's runtime).
    #[arg(long, env = "DEPTH_BROKER_THREADS")]
    broker_threads: Option<usize>,
    /// Tokio worker threads of the client (default: one per core).
    #[arg(long, env = "DEPTH_THREADS")]
    threads: Option<usize>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    target::init_stderr_logs();
    target::run_on_runtime(args.threads, run(args))
}

/// "10k" -> 10,000; "2M" -> 2,000,000; sorted, without repeats.
fn parse_checkpoints(text: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (digits, factor) = match part.as_bytes().last() {
            Some(b'k' | b'K') => (&part[..part.len() - 1], 1_000),
            Some(b'm' | b'M') => (&part[..part.len() - 1], 1_000_000),
            _ => (part, 1),
        };
        let n: u64 = digits
            .parse()
            .with_context(|| format!("checkpoint {part:?} is not a number"))?;
        out.push(n * factor);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        bail!("no checkpoints in {text:?}");
    }
    Ok(out)
}

/// A temporary directory, removed with everything in it when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(parent: Option<&Path>, run: u32) -> Result<WorkDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = parent.join(format!("ramqp-depth-{run:08x}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The broker under test, however it was started.
enum Under {
    /// In-process, or by URL.
    Target(Target),
    /// A ramqp-brokerd the bench started (--recovery).
    Child(Brokerd),
}

async fn run(args: Args) -> Result<()> {
    payload::check_size(args.size)?;
    let checkpoints = parse_checkpoints(&args.checkpoints)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let run = payload::new_run_id();
    let work = WorkDir::create(args.work_dir.as_deref(), run)?;
    let data_dir = work.0.join("data");
    if args.rejoin {
        return rejoin::run(&args, &work.0, run, &checkpoints).await;
    }

    // The broker, what to watch of it, and how to describe it.
    let mut spec = TargetSpec {
        url: args.url.clone(),
        pid: args.pid.first().copied(),
        data_dir: Some(data_dir.clone()),
        broker_threads: args.broker_threads,
    };
    let mut watched = Watched {
        pids: args.pid.clone(),
        data_dirs: args.data_dir.clone(),
    };
    let (under, url, rss_scope) = if args.recovery {
        let binary = args.brokerd.clone().context("--recovery needs --brokerd")?;
        let mut child = Brokerd::spawn(&binary, "127.0.0.1:0", &data_dir, &work.0, "brokerd")?;
        let addr = child
            .listening(timeout.max(Duration::from_secs(30)))
            .await?;
        spec.url = Some(format!("amqp://{addr}"));
        spec.pid = Some(child.pid);
        watched = Watched {
            pids: vec![child.pid],
            data_dirs: vec![data_dir.clone()],
        };
        let url = format!("amqp://{addr}");
        (
            Under::Child(child),
            url,
            "VmRSS of the ramqp-brokerd the bench started",
        )
    } else {
        let target = spec.start().await?;
        if args.url.is_none() {
            watched = Watched {
                pids: vec![std::process::id()],
                data_dirs: vec![data_dir.clone()],
            };
        }
        let scope = match (&target, watched.pids.len()) {
            (Target::InProcess(..), _) => {
                "VmRSS of the bench's own process (in-process broker + client + harness)"
            }
            (_, 0) => "n/a (no --pid given)",
            (_, 1) => "VmRSS of the broker process (--pid)",
            _ => "sum of VmRSS of the broker processes (--pid)",
        };
        (Under::Target(target), String::new(), scope)
    };
    let url = match &under {
        Under::Target(t) => t.url(),
        Under::Child(_) => url,
    };
    let mut described = target::describe(&spec, &args.address);
    described["pids"] = json!(watched.pids);
    described["data_dirs"] = json!(watched.data_dirs);
    if let Under::Child(_) = under {
        described["kind"] = json!("brokerd started by the bench (--recovery)");
        described["broker"] = json!(format!(
            "{}",
            args.brokerd.as_deref().unwrap_or(Path::new("?")).display()
        ));
    }
    let data_scope = if watched.data_dirs.is_empty() {
        "n/a (no --data-dir given)"
    } else {
        "sum of file sizes under the data dir(s)"
    };
    eprintln!(
        "depth: {} {}, checkpoints {:?}, {} B bodies, window {}, probe {}, drain credit {}{}, client {}",
        if args.recovery { "brokerd started by the bench at" } else { "target" },
        if args.url.is_some() || args.recovery { target::redact(&url) } else { "in-process broker".into() },
        checkpoints,
        args.size,
        args.window,
        args.probe,
        args.credit,
        if args.recovery { format!(", then recovery ({})", if args.kill { "SIGKILL" } else { "SIGTERM" }) } else { String::new() },
        raw::client_stack(),
    );
    eprintln!("depth: RSS: {rss_scope}; data: {data_scope}");

    // Leftovers of an earlier run on an external broker.
    let purged = if args.url.is_some() {
        purge(&url, &args.address, run, args.credit, timeout).await?
    } else {
        0
    };

    let progress = Progress::start();
    let stall = Duration::from_millis(args.stall_ms);
    let mut filler = Filler::connect(
        &url,
        &args.address,
        run,
        args.size,
        args.window,
        stall,
        timeout,
    )
    .await?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for &checkpoint in &checkpoints {
        let stage = filler.fill_to(checkpoint, &progress).await?;
        let depth = filler.published();
        let footprint = watched.sample();
        let broker_depth = match &under {
            Under::Target(t) => t.queue_depth(&args.address).map(|(r, u)| r + u),
            Under::Child(_) => None,
        };
        progress.phase(&format!("probe at depth {depth}"), args.probe);
        let probe = filler
            .probe(args.probe, &progress)
            .await
            .with_context(|| format!("probing at depth {depth}"))?;
        progress.idle();
        let line = format!(
            "{checkpoint:>9} {depth:>9} {:>9.0} {:>8.1} {:>5} {:>9} {:>9} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            stage.msg_s,
            stage.longest_accept_gap_ms,
            stage.gaps_over_threshold,
            footprint.rss_kib.map_or("n/a".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
            footprint.data_dir_bytes.map_or("n/a".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
            probe.p50,
            probe.p99,
            probe.p99_9,
            probe.max,
        );
        eprintln!("depth: checkpoint {checkpoint}: depth {depth}, fill {:.0} msg/s, longest accept gap {:.1} ms, {}, probe {}", stage.msg_s, stage.longest_accept_gap_ms, footprint.line(), probe.line());
        lines.push(line);
        rows.push(json!({
            "checkpoint": checkpoint,
            "depth": depth,
            "depth_after_probe": filler.published(),
            "broker_reported_depth": broker_depth,
            "fill": stage,
            "stall": stage.longest_accept_gap_ms > args.stall_ms as f64,
            "footprint": footprint.to_json(),
            "rss_kib": footprint.rss_kib,
            "data_dir_bytes": footprint.data_dir_bytes,
            "probe_us": probe,
        }));
    }
    let published = filler.published();
    let mut close_errors = Vec::new();
    if let Err(e) = filler.close().await {
        close_errors.push(format!("publisher: {e:#}"));
    }

    // Back to empty: the plain drain, or the recovery's.
    let settle = Duration::from_secs(args.settle_secs);
    let mut drain_cpu = None;
    let (drained, recovery, after, under) = match under {
        Under::Child(mut old) => {
            let restart = recovery::Restart {
                binary: args.brokerd.clone().context("--recovery needs --brokerd")?,
                data_dir: data_dir.clone(),
                logs: work.0.clone(),
                addr: url
                    .trim_start_matches("amqp://")
                    .parse()
                    .context("the broker's address")?,
                address: args.address.clone(),
                run,
                credit: args.credit,
                kill: args.kill,
                timeout,
                limit: Duration::from_secs(args.recovery_limit_secs),
            };
            let (recovery, new, conn, receiver) =
                recovery::recover(&mut old, &restart, published, &progress).await?;
            drop(old);
            watched.pids = vec![new.pid];
            let after = watched.sample_for(settle, Duration::from_millis(500)).await;
            close(conn, receiver, &mut close_errors).await;
            (recovery.drained, Some(recovery), after, Under::Child(new))
        }
        Under::Target(target) => {
            let started = Instant::now();
            let cpu_before = cpu::CpuMark::now(&watched.pids);
            let (mut conn, receiver) =
                drain::attach(&url, &args.address, run, args.credit, timeout).await?;
            progress.phase("drain", published);
            let drained = drain::drain(
                started, &mut conn, &receiver, run, published, timeout, None, &progress,
            )
            .await?;
            drain_cpu = Some(cpu_before.used_until(
                &cpu::CpuMark::now(&watched.pids),
                started.elapsed().as_secs_f64(),
            ));
            progress.idle();
            let after = watched.sample_for(settle, Duration::from_millis(500)).await;
            close(conn, receiver, &mut close_errors).await;
            (drained, None, after, Under::Target(target))
        }
    };
    drop(progress);
    match under {
        Under::Target(target) => target.shutdown().await,
        Under::Child(mut child) => {
            if let Err(e) = child
                .stop(false, timeout.max(Duration::from_secs(60)))
                .await
            {
                close_errors.push(format!("stopping ramqp-brokerd: {e:#}"));
            }
        }
    }
    for e in &close_errors {
        eprintln!("depth: WARNING close: {e}");
    }

    // The result.
    let last = after.last().cloned().unwrap_or_else(|| watched.sample());
    let ok = drained.exact() && drained.received == published;
    let kind = target::queue_kind(&args.address);
    let scenario = if args.recovery {
        format!(
            "depth.{kind}.recovery.{}",
            if args.kill { "kill" } else { "term" }
        )
    } else {
        format!("depth.{kind}")
    };
    let mut result = report::context("depth", &scenario, described);
    result.insert("client".into(), json!(raw::client_stack()));
    result.insert(
        "settings".into(),
        json!({
            "checkpoints": checkpoints,
            "size_bytes": args.size,
            "window": args.window,
            "probe_n": args.probe,
            "drain_credit": args.credit,
            "stall_ms": args.stall_ms,
            "settle_secs": args.settle_secs,
            "timeout_ms": args.timeout_ms,
            "recovery": args.recovery,
            "kill": args.kill,
        }),
    );
    result.insert("rss_scope".into(), json!(rss_scope));
    result.insert("data_dir_scope".into(), json!(data_scope));
    result.insert("purged_before".into(), json!(purged));
    result.insert("checkpoints".into(), Value::Array(rows));
    result.insert("published_total".into(), json!(published));
    result.insert("drain".into(), json!(drained));
    result.insert("drain_cpu".into(), json!(drain_cpu));
    result.insert("after_drain".into(), after_json(&after, &last, settle));
    result.insert("recovery".into(), json!(recovery));
    result.insert("ok".into(), json!(ok));
    result.insert("close_errors".into(), json!(close_errors));

    eprintln!(
        "depth: summary ({scenario}, {} B, window {}, probe {} per checkpoint)",
        args.size, args.window, args.probe
    );
    eprintln!(
        "{:>9} {:>9} {:>9} {:>8} {:>5} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "checkpt",
        "depth",
        "fill/s",
        "gap ms",
        ">thr",
        "RSS MiB",
        "data MiB",
        "p50 µs",
        "p99 µs",
        "p99.9",
        "max µs"
    );
    for line in &lines {
        eprintln!("{line}");
    }
    eprintln!(
        "depth: drain {} of {} in {:.2} s = {:.0} msg/s (missing {}, duplicates {}, extra {}, foreign {}); after {} s: {}",
        drained.received, published, drained.secs, drained.msg_s, drained.missing, drained.duplicates, drained.extra, drained.foreign,
        args.settle_secs, last.line()
    );
    if let Some(cpu) = &drain_cpu {
        eprintln!("depth: CPU during the drain: {}", cpu.line());
    }
    if let Some(r) = &recovery {
        eprintln!(
            "depth: recovery ({}): stop {:.0} ms; restart -> port {:.0} ms, attach {:.0} ms, first delivery {:.0} ms, all {} received {:.0} ms; count {}",
            r.signal, r.stop_ms, r.restart_to_port_ms, r.restart_to_attach_ms, r.restart_to_first_delivery_ms,
            r.drained.received, r.restart_to_all_received_ms,
            if r.count_matches { "matches" } else { "DOES NOT MATCH" }
        );
    }
    report::emit(&Value::Object(result))?;
    if !ok {
        bail!(
            "the drain did not return exactly the {published} accepted messages (received {}, missing {}, duplicates {}, extra {})",
            drained.received, drained.missing, drained.duplicates, drained.extra
        );
    }
    Ok(())
}

/// Take and accept whatever `address` holds (an earlier run's messages).
async fn purge(url: &str, address: &str, run: u32, credit: u32, timeout: Duration) -> Result<u64> {
    let (mut conn, receiver) = drain::attach(url, address, run, credit, timeout)
        .await
        .context("purge")?;
    let purged = receiver
        .purge(&mut conn, Duration::from_millis(500))
        .await?;
    receiver.detach(&mut conn).await?;
    conn.close().await?;
    if purged > 0 {
        eprintln!("depth: purged {purged} message(s) left in {address}");
    }
    Ok(purged)
}

async fn close(mut conn: Connection, receiver: Receiver, errors: &mut Vec<String>) {
    if let Err(e) = receiver.detach(&mut conn).await {
        errors.push(format!("consumer detach: {e:#}"));
    }
    if let Err(e) = conn.close().await {
        errors.push(format!("consumer close: {e:#}"));
    }
}

/// The footprint after the drain: the last reading, and how it moved.
fn after_json(readings: &[Footprint], last: &Footprint, settle: Duration) -> Value {
    let first = readings.first().unwrap_or(last);
    json!({
        "rss_kib": last.rss_kib,
        "data_dir_bytes": last.data_dir_bytes,
        "last": last.to_json(),
        "first": first.to_json(),
        "samples_n": readings.len(),
        "span_secs": settle.as_secs_f64(),
        "data_dir_bytes_series": readings.iter().map(|f| f.data_dir_bytes).collect::<Vec<_>>(),
        "rss_kib_series": readings.iter().map(|f| f.rss_kib).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_parse_with_suffixes() {
        let parsed = parse_checkpoints("0, 10k,2M,500,10000").expect("valid list");
        assert_eq!(parsed, vec![0, 500, 10_000, 2_000_000]);
        assert!(parse_checkpoints("1x").is_err());
        assert!(parse_checkpoints(" , ").is_err());
    }
}
