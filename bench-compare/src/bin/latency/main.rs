//! `latency`: closed-loop end-to-end latency, then a blast.
//!
//! Two connections, like two separate applications: a publisher and a
//! consumer, both fe2o3-amqp (`fe2o3.rs`), or both the bench's own client with
//! `--client raw` (`raw.rs`, `src/raw/`). The closed loop publishes one
//! message, waits until the consumer has it, accepts it and repeats (one in
//! flight); after a discarded warm-up it records LAT_LAT_N samples. With
//! `--confirm` a publish counts as sent only once the broker's `accepted`
//! came back. Then the blast: LAT_N messages published as fast as possible
//! (pre-settled, or confirmed with a window of in-flight publishes) while the
//! consumer holds no credit, then drained with credit 1,000, timing both
//! phases.
//!
//! Every wait has a timeout: a broker that loses a message makes the bin
//! fail naming the message, instead of hanging. Each message carries a run
//! id and sequence number, so stale, duplicated and reordered deliveries are
//! detected too. See `src/amqp.rs` for the fe2o3-amqp fast path used.
//! The result's `client` names the stack that produced it.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Parser};
use serde_json::{json, Value};

use ramqp_bench_compare::payload;
use ramqp_bench_compare::report::{self, Percentiles};
use ramqp_bench_compare::target::{self, TargetSpec};

mod fe2o3;
mod raw;

/// Closed-loop end-to-end latency and blast throughput over AMQP 1.0.
/// Flags override the LAT_* environment variables.
#[derive(Debug, Clone, Parser)]
#[command(name = "latency", version)]
struct Args {
    /// Broker URL (amqp://[user:pass@]host:port); unset: the in-process broker.
    #[arg(long, env = "LAT_URL")]
    url: Option<String>,
    /// Queue address.
    #[arg(long, env = "LAT_ADDRESS", default_value = "/queues/lat")]
    address: String,
    /// Messages in the blast (0 skips it).
    #[arg(long, env = "LAT_N", default_value_t = 50_000)]
    n: u64,
    /// Latency samples recorded (after the warm-up).
    #[arg(long = "lat-n", env = "LAT_LAT_N", default_value_t = 10_000)]
    lat_n: u64,
    /// Closed-loop round trips discarded before recording.
    #[arg(long, env = "LAT_WARMUP", default_value_t = 1_000)]
    warmup: u64,
    /// Body size in bytes.
    #[arg(long, env = "LAT_PAYLOAD", default_value_t = 256)]
    payload: usize,
    /// Publish unsettled and wait for `accepted` (`--confirm`, `--confirm=false`).
    #[arg(long, env = "LAT_CONFIRM", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    confirm: bool,
    /// Process id of an external broker, to read its RSS from /proc.
    #[arg(long, env = "LAT_PID")]
    pid: Option<u32>,
    /// Trials (a fresh in-process broker each); results give median and min-max.
    #[arg(long, env = "LAT_TRIALS", default_value_t = 1)]
    trials: u32,
    /// Consumer credit (kept topped up) for the latency loop and the drain.
    #[arg(long, env = "LAT_CREDIT", default_value_t = 1_000)]
    credit: u32,
    /// Confirmed publishes in flight during the blast (with --confirm).
    #[arg(long, env = "LAT_WINDOW", default_value_t = 1_000)]
    window: usize,
    /// Longest wait for any single step (connect, publish, delivery), ms.
    #[arg(long, env = "LAT_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Data directory of the in-process broker (a temporary one if unset).
    #[arg(long, env = "LAT_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Run the in-process broker on its own tokio runtime with this many
    /// worker threads (default: it shares the client's runtime).
    #[arg(long, env = "LAT_BROKER_THREADS")]
    broker_threads: Option<usize>,
    /// Client stack: `fe2o3` (fe2o3-amqp) or `raw` (the bench's own client
    /// on broker::codec, src/raw/).
    #[arg(long, env = "LAT_CLIENT", default_value = "fe2o3",
          value_parser = clap::builder::PossibleValuesParser::new(["fe2o3", "raw"]))]
    client: String,
    /// Tokio worker threads of the client (default: one per core).
    #[arg(long, env = "LAT_THREADS")]
    threads: Option<usize>,
    /// Every message carries an application-properties section with
    /// `colour = 'red'` (raw client only), so a run with `--selector` and one
    /// without send the same bytes.
    #[arg(long, env = "LAT_COLOUR")]
    colour: bool,
    /// The consumer attaches with this JMS selector as its source filter
    /// (raw client only; implies --colour), e.g. "colour = 'red'".
    #[arg(long, env = "LAT_SELECTOR")]
    selector: Option<String>,
    /// Pause before each recorded round trip, ms: past a quorum queue's
    /// quiet delay (2 s) every publish finds its group quiet, so the
    /// closed loop measures the first publish after a quiet spell.
    #[arg(long, env = "LAT_GAP_MS", default_value_t = 0)]
    gap_ms: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    target::init_stderr_logs();
    target::run_on_runtime(args.threads, run(args))
}

/// The pause before round trip `seq` (`--gap-ms`; none in the warm-up).
async fn gap(args: &Args, seq: u64) {
    if args.gap_ms > 0 && seq >= args.warmup {
        tokio::time::sleep(std::time::Duration::from_millis(args.gap_ms)).await;
    }
}

async fn run(args: Args) -> Result<()> {
    payload::check_size(args.payload)?;
    if (args.colour || args.selector.is_some()) && args.client != "raw" {
        bail!("--colour and --selector need --client raw");
    }
    if args.lat_n == 0 && args.n == 0 {
        bail!("nothing to do: LAT_LAT_N and LAT_N are both 0");
    }
    let spec = TargetSpec {
        url: args.url.clone(),
        pid: args.pid,
        data_dir: args.data_dir.clone(),
        broker_threads: args.broker_threads,
    };
    let mode = if args.confirm {
        "confirm"
    } else {
        "presettled"
    };
    let kind = target::queue_kind(&args.address);
    let scenario = format!("latency.{kind}.{mode}");
    eprintln!(
        "latency: {} target, {} {}, {} B bodies, publish {mode}, {} warm-up + {} samples, blast {}, {} trial(s), client {}",
        spec.kind(),
        args.url.as_deref().map(target::redact).unwrap_or_else(|| "in-process broker".into()),
        args.address,
        args.payload,
        args.warmup,
        args.lat_n,
        args.n,
        args.trials,
        report::client_stack_of(&args.client),
    );

    let mut trials = Vec::new();
    let mut rss_scope = "n/a";
    for trial in 1..=args.trials.max(1) {
        let target = spec.start().await?;
        rss_scope = target.rss_scope();
        let outcome = if args.client == "raw" {
            raw::run_trial(&args, &target, trial).await
        } else {
            fe2o3::run_trial(&args, &target, trial).await
        };
        target.shutdown().await;
        let result = outcome.with_context(|| format!("trial {trial}"))?;
        trials.push(result);
    }

    let summary = report::summarize(
        &trials,
        &[
            "/latency_us/p50",
            "/latency_us/p90",
            "/latency_us/p99",
            "/latency_us/p99_9",
            "/latency_us/max",
            "/latency_us/mean",
            "/confirm_us/p50",
            "/confirm_us/p99",
            "/confirm_us/p99_9",
            "/blast/publish_msg_s",
            "/blast/drain_msg_s",
            "/blast/total_msg_s",
            "/rss_kib",
        ],
    );
    let mut result = report::context("latency", &scenario, target::describe(&spec, &args.address));
    let pick = |key: &str| summary.get(key).cloned().unwrap_or(Value::Null);
    result.insert(
        "client".into(),
        json!(report::client_stack_of(&args.client)),
    );
    result.insert("payload_bytes".into(), json!(args.payload));
    result.insert("selector".into(), json!(args.selector));
    result.insert(
        "colour".into(),
        json!(args.colour || args.selector.is_some()),
    );
    result.insert("publish".into(), json!(mode));
    result.insert("samples".into(), json!(args.lat_n));
    result.insert("warmup".into(), json!(args.warmup));
    result.insert("gap_ms".into(), json!(args.gap_ms));
    result.insert("blast_n".into(), json!(args.n));
    result.insert("credit".into(), json!(args.credit));
    result.insert(
        "window".into(),
        if args.confirm {
            json!(args.window)
        } else {
            Value::Null
        },
    );
    result.insert("trials_n".into(), json!(trials.len()));
    result.insert(
        "percentiles_us".into(),
        json!({
            "p50": pick("latency_us.p50"),
            "p90": pick("latency_us.p90"),
            "p99": pick("latency_us.p99"),
            "p99_9": pick("latency_us.p99_9"),
            "max": pick("latency_us.max"),
            "mean": pick("latency_us.mean"),
        }),
    );
    if args.confirm {
        result.insert(
            "confirm_percentiles_us".into(),
            json!({
                "p50": pick("confirm_us.p50"),
                "p99": pick("confirm_us.p99"),
                "p99_9": pick("confirm_us.p99_9"),
            }),
        );
    }
    result.insert(
        "throughput_msg_s".into(),
        json!({
            "publish": pick("blast.publish_msg_s"),
            "drain": pick("blast.drain_msg_s"),
            "total": pick("blast.total_msg_s"),
        }),
    );
    result.insert("rss_kib".into(), pick("rss_kib"));
    result.insert("rss_scope".into(), json!(rss_scope));
    result.insert("trials".into(), Value::Array(trials));
    let result = Value::Object(result);

    eprintln!("latency: summary over trials, median (min-max):");
    for (label, key, decimals) in [
        ("p50 µs", "latency_us.p50", 1),
        ("p90 µs", "latency_us.p90", 1),
        ("p99 µs", "latency_us.p99", 1),
        ("p99.9 µs", "latency_us.p99_9", 1),
        ("max µs", "latency_us.max", 1),
        ("blast publish msg/s", "blast.publish_msg_s", 0),
        ("blast drain msg/s", "blast.drain_msg_s", 0),
        ("blast total msg/s", "blast.total_msg_s", 0),
        ("RSS KiB", "rss_kib", 0),
    ] {
        let line = summary
            .get(key)
            .and_then(|v| serde_json::from_value::<report::Spread>(v.clone()).ok())
            .map(|s| s.line(decimals))
            .unwrap_or_else(|| "n/a".into());
        eprintln!("  {label:<20} {line}");
    }
    report::emit(&result)
}

/// Deliveries the consumer took that were not ours (left over from an
/// earlier run on an external broker).
#[derive(Default)]
struct Checks {
    stale: u64,
}

/// The closed loop's percentiles on stderr.
fn print_loop(args: &Args, trial: u32, latency: &Percentiles, confirm: Option<&Percentiles>) {
    if args.lat_n > 0 {
        eprintln!("latency: trial {trial}: closed loop {}", latency.line());
        if let Some(confirm) = confirm {
            eprintln!(
                "latency: trial {trial}: of which publish -> accepted {}",
                confirm.line()
            );
        }
    }
}

/// The blast's rates on stderr.
fn print_blast(args: &Args, trial: u32, blast: Option<&Blast>, rss_kib: Option<u64>) {
    if let Some(b) = blast {
        eprintln!(
            "latency: trial {trial}: blast {} msgs: publish {:.0} msg/s ({:.3} s), drain {:.0} msg/s ({:.3} s), total {:.0} msg/s; RSS {}",
            args.n,
            b.publish_msg_s,
            b.publish_secs,
            b.drain_msg_s,
            b.drain_secs,
            b.total_msg_s,
            rss_kib.map_or("n/a".into(), |k| format!("{k} KiB")),
        );
        if b.out_of_order > 0 {
            eprintln!(
                "latency: trial {trial}: WARNING {} deliveries out of publish order; first (expected, delivered) blast indexes: {:?}",
                b.out_of_order, b.order_samples
            );
        }
    }
}

/// One trial's result object (and the stale count on stderr).
#[allow(clippy::too_many_arguments)]
fn trial_json(
    args: &Args,
    trial: u32,
    latency: Percentiles,
    confirm: Option<Percentiles>,
    blast: Option<Blast>,
    rss_kib: Option<u64>,
    purged: u64,
    stale: u64,
    close_errors: Vec<String>,
) -> Value {
    if stale > 0 {
        eprintln!(
            "latency: trial {trial}: {} stale message(s) from earlier runs were taken and skipped",
            stale
        );
    }

    json!({
        "trial": trial,
        "latency_us": latency,
        "confirm_us": confirm,
        "blast": blast.map(|b| json!({
            "messages": args.n,
            "publish_secs": b.publish_secs,
            "drain_secs": b.drain_secs,
            "publish_msg_s": report::round1(b.publish_msg_s),
            "drain_msg_s": report::round1(b.drain_msg_s),
            "total_msg_s": report::round1(b.total_msg_s),
            "out_of_order": b.out_of_order,
            "first_out_of_order": b.order_samples.iter().map(|(e, g)| json!({"expected": e, "delivered": g})).collect::<Vec<_>>(),
        })),
        "rss_kib": rss_kib,
        "purged_before": purged,
        "stale_skipped": stale,
        "close_errors": close_errors,
    })
}

struct Blast {
    publish_secs: f64,
    drain_secs: f64,
    publish_msg_s: f64,
    drain_msg_s: f64,
    total_msg_s: f64,
    out_of_order: u64,
    order_samples: Vec<(u64, u64)>,
}
