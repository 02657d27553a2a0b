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

use std::collections::VecDeque;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Parser};
use fe2o3_amqp::link::delivery::Delivery;
use fe2o3_amqp::types::messaging::Data;
use fe2o3_amqp::{Receiver, Sender};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use ramqp_bench_compare::amqp::{self, within, Endpoint};
use ramqp_bench_compare::payload::{self, SeqSet, Stamp};
use ramqp_bench_compare::report::{self, Percentiles, Spread};
use ramqp_bench_compare::target::{self, Target, TargetSpec};

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
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = args.threads {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = runtime.build().context("build the tokio runtime")?;
    runtime.block_on(async move {
        tokio::spawn(run(args))
            .await
            .map_err(|e| anyhow!("rig task failed: {e}"))?
    })
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
        report::client_stack(),
    );

    let mut results = Vec::new();
    let mut rss_scope = "n/a";
    for &size in &sizes {
        for trial in 1..=args.trials.max(1) {
            let run_spec = RunSpec { size, trial };
            let target = spec.start().await?;
            rss_scope = target.rss_scope();
            let outcome = run_one(&args, &target, &run_spec).await;
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

/// State shared by the tasks of one run.
struct Shared {
    run: u32,
    size: usize,
    presettled: bool,
    window: usize,
    timeout: Duration,
    /// Set when publishers must stop (duration over, or failure).
    stop: AtomicBool,
    /// Published: confirmed `accepted`, or sent when pre-settled.
    published: AtomicU64,
    /// Delivered to (and accepted by) consumers.
    delivered: AtomicU64,
    /// Total the consumers must see before they stop; MAX until known.
    expect_total: AtomicU64,
    /// Latency samples are taken for deliveries in [from, to) ns since the
    /// epoch; the whole run when `None`.
    sample_window: Option<(u64, u64)>,
}

struct PublisherDone {
    sent: u64,
    finished_ns: u64,
    send_lag: Option<Histogram<u64>>,
    close_error: Option<String>,
}

struct ConsumerDone {
    latency: Histogram<u64>,
    seqs: Vec<SeqSet>,
    stale: u64,
    last_delivery_ns: u64,
    close_error: Option<String>,
}

async fn run_one(args: &Args, target: &Target, spec: &RunSpec) -> Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let url = target.url();
    let run = payload::new_run_id();
    let count_mode = args.count.is_some();
    let max_secs = args.max_secs.unwrap_or(if count_mode {
        600.0
    } else {
        args.warmup + args.duration + 60.0
    });
    let hard_deadline = Instant::now() + Duration::from_secs_f64(max_secs);

    // Consumers first, so nothing published waits for one to attach.
    let mut consumer_links = Vec::new();
    for c in 0..args.consumers {
        let mut endpoint = amqp::connect(&url, &format!("ramqp-rig-con-{run:08x}-{c}"), timeout)
            .await
            .with_context(|| format!("consumer {c} connection"))?;
        let receiver = endpoint
            .receiver(
                &format!("rig-receiver-{run:08x}-{c}"),
                &args.address,
                args.credit,
            )
            .await?;
        consumer_links.push((endpoint, receiver));
    }
    let mut purged = 0u64;
    if matches!(target, Target::Url { .. }) {
        if let Some((_, receiver)) = consumer_links.first_mut() {
            purged = purge(receiver, timeout).await?;
            if purged > 0 {
                eprintln!("rig: purged {purged} message(s) left in {}", args.address);
            }
        }
    }
    let mut publisher_links = Vec::new();
    for p in 0..args.publishers {
        let mut endpoint = amqp::connect(&url, &format!("ramqp-rig-pub-{run:08x}-{p}"), timeout)
            .await
            .with_context(|| format!("publisher {p} connection"))?;
        let sender = endpoint
            .sender(
                &format!("rig-sender-{run:08x}-{p}"),
                &args.address,
                args.presettled,
            )
            .await?;
        publisher_links.push((endpoint, sender));
    }

    let start = Instant::now();
    let warmup = if count_mode { 0.0 } else { args.warmup };
    let window_from = start + Duration::from_secs_f64(warmup);
    let window_to = window_from + Duration::from_secs_f64(args.duration);
    let shared = Arc::new(Shared {
        run,
        size: spec.size,
        presettled: args.presettled,
        window: args.window.max(1),
        timeout,
        stop: AtomicBool::new(false),
        published: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        expect_total: AtomicU64::new(u64::MAX),
        sample_window: (!count_mode).then(|| {
            (
                payload::ns_since_epoch(window_from),
                payload::ns_since_epoch(window_to),
            )
        }),
    });

    let consumers: Vec<JoinHandle<Result<ConsumerDone>>> = consumer_links
        .into_iter()
        .map(|(endpoint, receiver)| {
            let shared = shared.clone();
            let publishers = args.publishers as usize;
            tokio::spawn(consume(shared, endpoint, receiver, publishers))
        })
        .collect();

    // Open loop: one pacing thread hands out intended send times.
    let mut pacer = None;
    let mut tick_receivers: Vec<Option<mpsc::UnboundedReceiver<u64>>> =
        (0..args.publishers).map(|_| None).collect();
    if let Some(rate) = args.rate {
        let mut tick_senders = Vec::new();
        for slot in tick_receivers.iter_mut() {
            let (tx, rx) = mpsc::unbounded_channel();
            tick_senders.push(tx);
            *slot = Some(rx);
        }
        let shared = shared.clone();
        let total = args.count;
        pacer = Some(
            std::thread::Builder::new()
                .name("rig-pacer".into())
                .spawn(move || pace(start, rate, total, tick_senders, &shared))
                .context("spawn the pacing thread")?,
        );
    }

    let per_publisher = |p: u64| {
        args.count.map(|n| {
            let publishers = u64::from(args.publishers);
            n / publishers + u64::from(p < n % publishers)
        })
    };
    let publishers: Vec<JoinHandle<Result<PublisherDone>>> = publisher_links
        .into_iter()
        .zip(tick_receivers)
        .enumerate()
        .map(|(p, ((endpoint, sender), ticks))| {
            let shared = shared.clone();
            let quota = if args.rate.is_some() {
                None
            } else {
                per_publisher(p as u64)
            };
            tokio::spawn(publish(shared, p as u32, endpoint, sender, quota, ticks))
        })
        .collect();

    // Measure: counters at the window edges, RSS sampled throughout.
    let mut rss_peak = target.rss_kib();
    let sample_every = Duration::from_millis(250);
    let mut snapshots = None;
    let outcome: Result<()> = async {
        if count_mode {
            while !publishers.iter().all(|h| h.is_finished()) {
                if Instant::now() >= hard_deadline {
                    bail!("publishing did not finish within --max-secs {max_secs}");
                }
                tokio::time::sleep(sample_every).await;
                rss_peak = rss_peak.max(target.rss_kib());
            }
        } else {
            let mut edge_from = None;
            loop {
                let now = Instant::now();
                if edge_from.is_none() && now >= window_from {
                    edge_from = Some((
                        shared.published.load(Ordering::Relaxed),
                        shared.delivered.load(Ordering::Relaxed),
                        now,
                    ));
                }
                if now >= window_to {
                    let to = (
                        shared.published.load(Ordering::Relaxed),
                        shared.delivered.load(Ordering::Relaxed),
                        now,
                    );
                    snapshots = edge_from.map(|from| (from, to));
                    break;
                }
                if publishers.iter().any(|h| h.is_finished()) {
                    // A publisher ended early: it failed; its error follows.
                    break;
                }
                let next = [window_from, window_to, now + sample_every]
                    .into_iter()
                    .filter(|t| *t > now)
                    .min()
                    .unwrap_or(now + sample_every);
                tokio::time::sleep_until(next.into()).await;
                rss_peak = rss_peak.max(target.rss_kib());
            }
        }
        Ok(())
    }
    .await;
    shared.stop.store(true, Ordering::Relaxed);
    let depth_at_stop = target.queue_depth(&args.address);
    let stopped_at = Instant::now();

    // Publishers finish their in-flight confirms, then consumers drain.
    let mut failures = Vec::new();
    if let Err(error) = outcome {
        failures.push(format!("{error:#}"));
    }
    let mut publisher_done = Vec::new();
    for (p, handle) in publishers.into_iter().enumerate() {
        match join_within(handle, timeout * 3, &format!("publisher {p}")).await {
            Ok(done) => publisher_done.push(done),
            Err(error) => failures.push(format!("publisher {p}: {error:#}")),
        }
    }
    if let Some(pacer) = pacer {
        let _ = tokio::task::spawn_blocking(move || pacer.join()).await;
    }
    let sent: Vec<u64> = publisher_done.iter().map(|d| d.sent).collect();
    let total_sent: u64 = sent.iter().sum();
    if failures.is_empty() {
        shared.expect_total.store(total_sent, Ordering::Relaxed);
    } else {
        // Consumers cannot know what to expect: let them stop now.
        shared.expect_total.store(0, Ordering::Relaxed);
    }
    let mut consumer_done = Vec::new();
    for (c, handle) in consumers.into_iter().enumerate() {
        let budget = Duration::from_secs_f64(
            (max_secs - start.elapsed().as_secs_f64()).max(timeout.as_secs_f64() * 2.0),
        );
        match join_within(handle, budget, &format!("consumer {c}")).await {
            Ok(done) => consumer_done.push(done),
            Err(error) => failures.push(format!("consumer {c}: {error:#}")),
        }
    }
    let drained_secs = stopped_at.elapsed().as_secs_f64();
    let rss_end = target.rss_kib();
    rss_peak = rss_peak.max(rss_end);
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }

    // Losses and duplicates across consumers.
    let mut seqs: Vec<SeqSet> = vec![SeqSet::default(); args.publishers as usize];
    let mut latency = report::histogram();
    let mut stale = 0;
    let mut last_delivery_ns = 0;
    let mut close_errors = Vec::new();
    for done in &consumer_done {
        for (mine, theirs) in seqs.iter_mut().zip(&done.seqs) {
            mine.merge(theirs);
        }
        latency
            .add(&done.latency)
            .map_err(|e| anyhow!("merge histograms: {e}"))?;
        stale += done.stale;
        last_delivery_ns = last_delivery_ns.max(done.last_delivery_ns);
        close_errors.extend(done.close_error.clone());
    }
    let mut send_lag = report::histogram();
    let mut finished_ns = 0;
    for done in &publisher_done {
        if let Some(lag) = &done.send_lag {
            send_lag
                .add(lag)
                .map_err(|e| anyhow!("merge histograms: {e}"))?;
        }
        finished_ns = finished_ns.max(done.finished_ns);
        close_errors.extend(done.close_error.clone());
    }
    let lost: u64 = seqs
        .iter()
        .zip(&sent)
        .map(|(set, &n)| set.missing_below(n))
        .sum();
    let duplicates: u64 = seqs.iter().map(|s| s.duplicates).sum();
    let delivered_total = shared.delivered.load(Ordering::Relaxed);

    let start_ns = payload::ns_since_epoch(start);
    let (publish_rate, deliver_rate, measured_secs) = match (count_mode, snapshots) {
        (true, _) => {
            let publish_secs = finished_ns.saturating_sub(start_ns) as f64 / 1e9;
            let deliver_secs = last_delivery_ns.saturating_sub(start_ns) as f64 / 1e9;
            (
                total_sent as f64 / publish_secs,
                delivered_total as f64 / deliver_secs,
                deliver_secs,
            )
        }
        (false, Some(((p0, d0, t0), (p1, d1, t1)))) => {
            let secs = t1.duration_since(t0).as_secs_f64();
            ((p1 - p0) as f64 / secs, (d1 - d0) as f64 / secs, secs)
        }
        (false, None) => bail!("the run ended before its measurement window"),
    };
    let growing = publish_rate > deliver_rate * 1.05;
    let latency_p = Percentiles::of(&latency);
    let lag_p = (args.rate.is_some()).then(|| Percentiles::of(&send_lag));

    eprintln!(
        "rig: {} B trial {}: published {:.0} msg/s, delivered {:.0} msg/s over {:.2} s; latency {}",
        spec.size,
        spec.trial,
        publish_rate,
        deliver_rate,
        measured_secs,
        latency_p.line()
    );
    if let Some(lag) = &lag_p {
        eprintln!("rig:   open-loop send lag behind schedule: {}", lag.line());
    }
    if growing {
        eprintln!(
            "rig:   QUEUE GREW: published {:.0} msg/s > delivered {:.0} msg/s (+{:.0}%){}; latency then measures time waiting in the queue",
            publish_rate,
            deliver_rate,
            (publish_rate / deliver_rate - 1.0) * 100.0,
            depth_at_stop
                .map(|(ready, _)| format!(", {ready} ready at the end of the window"))
                .unwrap_or_default()
        );
    }
    if lost > 0 || duplicates > 0 || stale > 0 {
        eprintln!("rig:   CHECK: lost {lost}, duplicates {duplicates}, stale {stale}");
    }
    for error in &close_errors {
        eprintln!("rig:   WARNING close: {error}");
    }
    if lost > 0 {
        bail!("{lost} published message(s) never arrived (duplicates {duplicates})");
    }

    Ok(json!({
        "body_bytes": spec.size,
        "trial": spec.trial,
        "measured_secs": measured_secs,
        "published": total_sent,
        "delivered": delivered_total,
        "publish_msg_s": report::round1(publish_rate),
        "deliver_msg_s": report::round1(deliver_rate),
        "growing_queue": growing,
        "queue_depth_at_stop": depth_at_stop.map(|(ready, unsettled)| json!({"ready": ready, "unsettled": unsettled})),
        "drain_after_stop_secs": drained_secs,
        "latency_us": latency_p,
        "send_lag_us": lag_p,
        "lost": lost,
        "duplicates": duplicates,
        "stale": stale,
        "purged_before": purged,
        "rss_kib_peak": rss_peak,
        "rss_kib_end": rss_end,
        "close_errors": close_errors,
    }))
}

/// Await a task within `limit`; abort it when late.
async fn join_within<T>(
    mut handle: JoinHandle<Result<T>>,
    limit: Duration,
    what: &str,
) -> Result<T> {
    match tokio::time::timeout(limit, &mut handle).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(anyhow!("{what} task failed: {join}")),
        Err(_) => {
            handle.abort();
            Err(anyhow!("{what} did not finish within {limit:?}"))
        }
    }
}

/// The pacing thread: intended send times at `rate` msg/s from `start`,
/// round-robin over the publishers, until stopped (or `total` handed out).
/// Sleeps to ~100 µs before each tick and spins the rest, since a tokio
/// timer only has millisecond resolution.
fn pace(
    start: Instant,
    rate: f64,
    total: Option<u64>,
    publishers: Vec<mpsc::UnboundedSender<u64>>,
    shared: &Shared,
) {
    let interval = 1.0 / rate;
    let spin = Duration::from_micros(100);
    let mut i: u64 = 0;
    loop {
        if shared.stop.load(Ordering::Relaxed) || total.is_some_and(|n| i >= n) {
            break;
        }
        let intended = start + Duration::from_secs_f64(i as f64 * interval);
        let now = Instant::now();
        if intended > now + spin {
            std::thread::sleep(intended - now - spin);
        }
        while Instant::now() < intended {
            std::hint::spin_loop();
        }
        let publisher = &publishers[(i % publishers.len() as u64) as usize];
        if publisher.send(payload::ns_since_epoch(intended)).is_err() {
            break; // that publisher is gone (failed); it reports why
        }
        i += 1;
    }
}

type InFlight = VecDeque<(u64, Pin<Box<amqp::Confirm>>)>;

async fn settle_front(shared: &Shared, publisher: u32, in_flight: &mut InFlight) -> Result<()> {
    if let Some((seq, fut)) = in_flight.pop_front() {
        amqp::confirmed(fut, shared.timeout, &|| {
            format!("publisher {publisher}: message #{seq}")
        })
        .await?;
        shared.published.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Send one message; pre-settled counts at once, unsettled joins `in_flight`.
async fn send_one(
    shared: &Shared,
    publisher: u32,
    sender: &mut Sender,
    in_flight: &mut InFlight,
    seq: u64,
    sent_ns: u64,
) -> Result<()> {
    if !shared.presettled && in_flight.len() >= shared.window {
        settle_front(shared, publisher, in_flight).await?;
    }
    let stamp = Stamp {
        run: shared.run,
        publisher,
        seq,
        sent_ns,
    };
    let message = amqp::message(payload::encode(stamp, shared.size));
    if shared.presettled {
        within(
            shared.timeout,
            &format!("publisher {publisher}: send message #{seq}"),
            sender.send(message),
        )
        .await?;
        shared.published.fetch_add(1, Ordering::Relaxed);
    } else {
        let fut = within(
            shared.timeout,
            &format!("publisher {publisher}: send message #{seq}"),
            sender.send_batchable(message),
        )
        .await?;
        in_flight.push_back((seq, Box::pin(fut)));
    }
    Ok(())
}

async fn publish(
    shared: Arc<Shared>,
    publisher: u32,
    endpoint: Endpoint,
    mut sender: Sender,
    quota: Option<u64>,
    ticks: Option<mpsc::UnboundedReceiver<u64>>,
) -> Result<PublisherDone> {
    let mut in_flight: InFlight = VecDeque::with_capacity(shared.window);
    let mut seq = 0u64;
    let result: Result<Option<Histogram<u64>>> = async {
        match ticks {
            None => {
                // Closed loop: as fast as the window allows.
                while !shared.stop.load(Ordering::Relaxed) && quota.is_none_or(|q| seq < q) {
                    send_one(&shared, publisher, &mut sender, &mut in_flight, seq, payload::now_ns())
                        .await?;
                    seq += 1;
                }
                Ok(None)
            }
            Some(mut ticks) => {
                // Open loop: send at each intended time; collect settlements
                // while waiting for the next tick.
                let mut lag = report::histogram();
                loop {
                    let front = in_flight.front_mut().map(|(_, fut)| fut);
                    tokio::select! {
                        biased;
                        outcome = async {
                            match front {
                                Some(fut) => fut.await,
                                None => std::future::pending().await,
                            }
                        } => {
                            let (seq, _) = in_flight.pop_front().ok_or_else(|| anyhow!("settlement without a publish"))?;
                            amqp::confirmed(async { outcome }, shared.timeout, &|| {
                                format!("publisher {publisher}: message #{seq}")
                            })
                            .await?;
                            shared.published.fetch_add(1, Ordering::Relaxed);
                        }
                        tick = ticks.recv() => {
                            let Some(intended_ns) = tick else { break };
                            send_one(&shared, publisher, &mut sender, &mut in_flight, seq, intended_ns)
                                .await?;
                            let behind = payload::now_ns().saturating_sub(intended_ns);
                            lag.record(behind.max(1)).map_err(|e| anyhow!("record send lag: {e}"))?;
                            seq += 1;
                        }
                    }
                }
                Ok(Some(lag))
            }
        }
    }
    .await;
    // Settle what is still in flight, also after a stop.
    let result = match result {
        Ok(lag) => {
            let mut drained = Ok(());
            while !in_flight.is_empty() {
                if let Err(error) = settle_front(&shared, publisher, &mut in_flight).await {
                    drained = Err(error);
                    break;
                }
            }
            drained.map(|()| lag)
        }
        Err(error) => Err(error),
    };
    let finished_ns = payload::now_ns();
    if result.is_err() {
        shared.stop.store(true, Ordering::Relaxed);
    }
    let timeout = shared.timeout;
    let closed = amqp::close_sender(sender, timeout)
        .await
        .and(endpoint.close().await);
    let send_lag = result?;
    Ok(PublisherDone {
        sent: seq,
        finished_ns,
        send_lag,
        close_error: closed
            .err()
            .map(|e| format!("publisher {publisher}: {e:#}")),
    })
}

async fn consume(
    shared: Arc<Shared>,
    endpoint: Endpoint,
    mut receiver: Receiver,
    publishers: usize,
) -> Result<ConsumerDone> {
    let mut done = ConsumerDone {
        latency: report::histogram(),
        seqs: vec![SeqSet::default(); publishers],
        stale: 0,
        last_delivery_ns: 0,
        close_error: None,
    };
    let poll = Duration::from_millis(200);
    let mut last_progress = Instant::now();
    let result: Result<()> = async {
        loop {
            let delivered = shared.delivered.load(Ordering::Relaxed);
            let expected = shared.expect_total.load(Ordering::Relaxed);
            if delivered >= expected {
                return Ok(());
            }
            let delivery: Delivery<Data> = match tokio::time::timeout(poll, receiver.recv::<Data>()).await {
                Ok(Ok(delivery)) => delivery,
                Ok(Err(error)) => bail!("receive failed: {error:?}"),
                Err(_) => {
                    let expected = shared.expect_total.load(Ordering::Relaxed);
                    if expected != u64::MAX && last_progress.elapsed() >= shared.timeout {
                        bail!(
                            "stalled: {} of {expected} published messages delivered, none for {:?} (lost or withheld by the broker)",
                            shared.delivered.load(Ordering::Relaxed),
                            shared.timeout
                        );
                    }
                    continue;
                }
            };
            let at_ns = payload::now_ns();
            last_progress = Instant::now();
            match payload::decode(&delivery.body().0) {
                Some(stamp) if stamp.run == shared.run && (stamp.publisher as usize) < publishers => {
                    let record = shared
                        .sample_window
                        .is_none_or(|(from, to)| at_ns >= from && at_ns < to);
                    if record {
                        done.latency
                            .record(at_ns.saturating_sub(stamp.sent_ns).max(1))
                            .map_err(|e| anyhow!("record latency: {e}"))?;
                    }
                    done.seqs[stamp.publisher as usize].insert(stamp.seq);
                    within(shared.timeout, "accept", receiver.accept(&delivery)).await?;
                    done.last_delivery_ns = at_ns;
                    shared.delivered.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    done.stale += 1;
                    within(shared.timeout, "accept a stale message", receiver.accept(&delivery)).await?;
                }
            }
        }
    }
    .await;
    let timeout = shared.timeout;
    let closed = amqp::close_receiver(receiver, timeout)
        .await
        .and(endpoint.close().await);
    result?;
    done.close_error = closed.err().map(|e| format!("consumer: {e:#}"));
    Ok(done)
}

/// Take whatever is in the queue already (external brokers only).
async fn purge(receiver: &mut Receiver, timeout: Duration) -> Result<u64> {
    let mut purged = 0u64;
    let idle = Duration::from_millis(500);
    while let Ok(received) = tokio::time::timeout(idle, receiver.recv::<Data>()).await {
        let delivery = received.map_err(|e| anyhow!("purge: receive failed: {e:?}"))?;
        within(timeout, "purge: accept", receiver.accept(&delivery)).await?;
        purged += 1;
    }
    Ok(purged)
}
