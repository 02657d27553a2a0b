//! `rig`: the throughput rig.
//!
//! P publishers (one connection each) with up to W unsettled publishes in
//! flight (or pre-settled), C consumers (one connection each) with credit
//! 1,000 accepting every message, one body size after another. Bounded by a
//! duration (after a discarded warm-up) or by a message count, and always by
//! `--max-secs`. Published (confirmed) and delivered rates are reported
//! separately; a published rate more than 5% above the delivered rate means
//! the queue grew during the run, and the result says so, since latency then
//! measures time spent waiting in the queue.
//!
//! `--rate R` switches to open loop: publishers are paced at R msg/s in
//! total by a timer thread, every message carries the time it was *meant*
//! to be sent, and latency is measured from that intended time, so a stall
//! in the broker (or the client) shows in the percentiles instead of being
//! hidden by a publisher that waited (coordinated omission avoided).
//!
//! Every message carries (run, publisher, sequence number): at the end the
//! rig counts lost, duplicated and stale messages.
//!
//! Two client stacks (`--client`), named in the result's `client`:
//! fe2o3-amqp (`consumer.rs`, `publisher.rs`) or the bench's raw pipelined
//! client on broker::codec (`raw.rs`); `links.rs` connects either.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Parser};
use serde_json::{json, Value};

use ramqp_bench_compare::amqp;
use ramqp_bench_compare::payload;
use ramqp_bench_compare::report::{self, Spread};
use ramqp_bench_compare::target::{self, TargetSpec};

mod consumer;
mod links;
mod pacer;
mod publisher;
mod raw;
mod run;

/// AMQP 1.0 throughput rig (closed loop with an in-flight window, or open
/// loop at a fixed rate). Flags override the RIG_* environment variables.
#[derive(Debug, Clone, Parser)]
#[command(name = "rig", version)]
struct Args {
    /// Broker URL (amqp://[user:pass@]host:port); unset: the in-process broker.
    #[arg(long, env = "RIG_URL")]
    url: Option<String>,
    /// Queue address.
    #[arg(long, env = "RIG_ADDRESS", default_value = "/queues/rig")]
    address: String,
    /// Publishers (one connection each).
    #[arg(long, short = 'p', env = "RIG_PUBLISHERS", default_value_t = 1)]
    publishers: u32,
    /// Consumers (one connection each).
    #[arg(long, short = 'c', env = "RIG_CONSUMERS", default_value_t = 1)]
    consumers: u32,
    /// Unsettled publishes in flight per publisher.
    #[arg(long, short = 'w', env = "RIG_WINDOW", default_value_t = 1_000)]
    window: usize,
    /// Credit per consumer (kept topped up).
    #[arg(long, env = "RIG_CREDIT", default_value_t = 1_000)]
    credit: u32,
    /// Body sizes, run one after another: e.g. 64,256,1k,8k.
    #[arg(long, env = "RIG_SIZES", default_value = "256", value_delimiter = ',')]
    sizes: Vec<String>,
    /// Measured seconds per run (after the warm-up). Ignored with --count.
    #[arg(long, short = 'd', env = "RIG_DURATION", default_value_t = 10.0)]
    duration: f64,
    /// Warm-up seconds discarded before measuring (duration mode).
    #[arg(long, env = "RIG_WARMUP", default_value_t = 2.0)]
    warmup: f64,
    /// Publish exactly this many messages in total per run (instead of a duration).
    #[arg(long, short = 'n', env = "RIG_COUNT")]
    count: Option<u64>,
    /// Open loop: publish at this total rate (msg/s); latency from intended send times.
    #[arg(long, env = "RIG_RATE")]
    rate: Option<f64>,
    /// Publish pre-settled instead of waiting for `accepted`.
    #[arg(long, env = "RIG_PRESETTLED", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    presettled: bool,
    /// Runs per body size (a fresh in-process broker each); median and min-max reported.
    #[arg(long, env = "RIG_TRIALS", default_value_t = 1)]
    trials: u32,
    /// Hard limit on one run, seconds (default: warm-up + duration + 60, or 600 with --count).
    #[arg(long, env = "RIG_MAX_SECS")]
    max_secs: Option<f64>,
    /// Longest wait for any single step (connect, settlement, progress), ms.
    #[arg(long, env = "RIG_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Process id of an external broker, to sample its RSS from /proc.
    #[arg(long, env = "RIG_PID")]
    pid: Option<u32>,
    /// Data directory of the in-process broker (a temporary one if unset).
    #[arg(long, env = "RIG_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Run the in-process broker on its own tokio runtime with this many
    /// worker threads (default: it shares the client's runtime).
    #[arg(long, env = "RIG_BROKER_THREADS")]
    broker_threads: Option<usize>,
    /// Tokio worker threads of the client (default: one per core).
    #[arg(long, env = "RIG_THREADS")]
    threads: Option<usize>,
    /// Client stack: `fe2o3` (fe2o3-amqp) or `raw` (the bench's own
    /// pipelined client on broker::codec, src/raw/).
    #[arg(long, env = "RIG_CLIENT", default_value = "fe2o3",
          value_parser = clap::builder::PossibleValuesParser::new(["fe2o3", "raw"]))]
    client: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    target::init_stderr_logs();
    target::run_on_runtime(args.threads, run(args))
}

/// What one run is.
#[derive(Debug, Clone)]
struct RunSpec {
    size: usize,
    trial: u32,
}

async fn run(args: Args) -> Result<()> {
    if args.publishers == 0 || args.consumers == 0 {
        bail!("need at least one publisher and one consumer");
    }
    if let Some(rate) = args.rate {
        if !(rate > 0.0 && rate.is_finite()) {
            bail!("--rate must be a positive number of messages per second");
        }
    }
    if args.count.is_none() && (args.duration.is_nan() || args.duration <= 0.0) {
        bail!("--duration must be positive (or give --count)");
    }
    let mut sizes = Vec::new();
    for text in &args.sizes {
        let size = amqp::parse_size(text)?;
        payload::check_size(size)?;
        sizes.push(size);
    }
    let spec = TargetSpec {
        url: args.url.clone(),
        pid: args.pid,
        data_dir: args.data_dir.clone(),
        broker_threads: args.broker_threads,
    };
    let mode = if args.rate.is_some() {
        "open-loop"
    } else {
        "throughput"
    };
    let publish = if args.presettled {
        "presettled"
    } else {
        "confirm"
    };
    let kind = target::queue_kind(&args.address);
    let scenario = format!(
        "rig.{kind}.{mode}.{publish}.p{}c{}",
        args.publishers, args.consumers
    );
    let bound = match args.count {
        Some(n) => format!("{n} messages"),
        None => format!("{:.1} s warm-up + {:.1} s", args.warmup, args.duration),
    };
    eprintln!(
        "rig: {} target {} {}, {mode}{}, publish {publish}, {} publisher(s) x window {}, {} consumer(s) x credit {}, sizes {:?}, {bound}, {} trial(s), client {}",
        spec.kind(),
        args.url.as_deref().map(target::redact).unwrap_or_else(|| "in-process broker".into()),
        args.address,
        args.rate.map(|r| format!(" at {r} msg/s")).unwrap_or_default(),
        args.publishers,
        args.window,
        args.consumers,
        args.credit,
        sizes,
        args.trials,
        report::client_stack_of(&args.client),
    );

    let mut results = Vec::new();
    let mut rss_scope = "n/a";
    for &size in &sizes {
        for trial in 1..=args.trials.max(1) {
            let run_spec = RunSpec { size, trial };
            let target = spec.start().await?;
            rss_scope = target.rss_scope();
            let outcome = run::run_one(&args, &target, &run_spec).await;
            target.shutdown().await;
            let result = outcome.with_context(|| format!("{size} B bodies, trial {trial}"))?;
            results.push(result);
        }
    }

    let mut summary = Vec::new();
    for &size in &sizes {
        let runs: Vec<Value> = results
            .iter()
            .filter(|r| r["body_bytes"] == json!(size))
            .cloned()
            .collect();
        let mut entry = report::summarize(
            &runs,
            &[
                "/publish_msg_s",
                "/deliver_msg_s",
                "/latency_us/p50",
                "/latency_us/p90",
                "/latency_us/p99",
                "/latency_us/p99_9",
                "/latency_us/max",
                "/rss_kib_peak",
            ],
        );
        if let Value::Object(map) = &mut entry {
            map.insert("body_bytes".into(), json!(size));
            map.insert(
                "growing_queue_runs".into(),
                json!(runs
                    .iter()
                    .filter(|r| r["growing_queue"] == json!(true))
                    .count()),
            );
        }
        summary.push(entry);
    }

    eprintln!(
        "rig: summary, median (min-max) over {} trial(s):",
        args.trials.max(1)
    );
    for entry in &summary {
        let spread = |key: &str, decimals: usize| {
            entry
                .get(key)
                .and_then(|v| serde_json::from_value::<Spread>(v.clone()).ok())
                .map(|s| s.line(decimals))
                .unwrap_or_else(|| "n/a".into())
        };
        eprintln!(
            "  {:>5} B: published {} msg/s, delivered {} msg/s, latency p50 {} / p99 {} / p99.9 {} µs{}",
            entry["body_bytes"],
            spread("publish_msg_s", 0),
            spread("deliver_msg_s", 0),
            spread("latency_us.p50", 1),
            spread("latency_us.p99", 1),
            spread("latency_us.p99_9", 1),
            if entry["growing_queue_runs"] != json!(0) {
                "  [QUEUE GREW]"
            } else {
                ""
            }
        );
    }

    let mut result = report::context("rig", &scenario, target::describe(&spec, &args.address));
    result.insert(
        "client".into(),
        json!(report::client_stack_of(&args.client)),
    );
    result.insert("mode".into(), json!(mode));
    result.insert("publish".into(), json!(publish));
    result.insert("publishers".into(), json!(args.publishers));
    result.insert("consumers".into(), json!(args.consumers));
    result.insert(
        "window".into(),
        if args.presettled {
            Value::Null
        } else {
            json!(args.window)
        },
    );
    result.insert("credit".into(), json!(args.credit));
    result.insert("rate_msg_s".into(), json!(args.rate));
    result.insert("count".into(), json!(args.count));
    result.insert(
        "duration_secs".into(),
        if args.count.is_some() {
            Value::Null
        } else {
            json!(args.duration)
        },
    );
    result.insert(
        "warmup_secs".into(),
        if args.count.is_some() {
            Value::Null
        } else {
            json!(args.warmup)
        },
    );
    result.insert("sizes".into(), json!(sizes));
    result.insert("trials_n".into(), json!(args.trials.max(1)));
    result.insert("rss_scope".into(), json!(rss_scope));
    result.insert(
        "latency_from".into(),
        json!(if args.rate.is_some() {
            "intended send time (open loop, coordinated omission avoided)"
        } else {
            "actual send time (closed loop: at full throughput this is mostly queueing)"
        }),
    );
    result.insert("summary".into(), Value::Array(summary));
    result.insert("results".into(), Value::Array(results));
    report::emit(&Value::Object(result))
}
