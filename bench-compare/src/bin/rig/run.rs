//! One run of the rig: connect the consumers and publishers (`links.rs`,
//! either client), start the pacer (open loop), measure over the window,
//! stop, drain, then check for lost and duplicated messages and build the
//! run's result. Owns `Shared`, the state the run's tasks share.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use ramqp_bench_compare::payload::{self, SeqSet};
use ramqp_bench_compare::report::{self, Percentiles};
use ramqp_bench_compare::target::Target;

use crate::links::Links;
use crate::pacer::pace;
use crate::{Args, RunSpec};

/// State shared by the tasks of one run.
pub(crate) struct Shared {
    pub(crate) run: u32,
    pub(crate) size: usize,
    pub(crate) presettled: bool,
    pub(crate) window: usize,
    pub(crate) timeout: Duration,
    /// Set when publishers must stop (duration over, or failure).
    pub(crate) stop: AtomicBool,
    /// Published: confirmed `accepted`, or sent when pre-settled.
    pub(crate) published: AtomicU64,
    /// Delivered to (and accepted by) consumers.
    pub(crate) delivered: AtomicU64,
    /// Total the consumers must see before they stop; MAX until known.
    pub(crate) expect_total: AtomicU64,
    /// Latency samples are taken for deliveries in [from, to) ns since the
    /// epoch; the whole run when `None`.
    pub(crate) sample_window: Option<(u64, u64)>,
}

pub(crate) async fn run_one(args: &Args, target: &Target, spec: &RunSpec) -> Result<Value> {
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

    let purge = matches!(target, Target::Url { .. });
    let (mut links, purged) = Links::connect(args, &url, run, timeout, purge).await?;
    if purged > 0 {
        eprintln!("rig: purged {purged} message(s) left in {}", args.address);
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

    let consumers = links.spawn_consumers(&shared, args.publishers as usize);

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
    let jobs = tick_receivers
        .into_iter()
        .enumerate()
        .map(|(p, ticks)| {
            let quota = if args.rate.is_some() {
                None
            } else {
                per_publisher(p as u64)
            };
            (quota, ticks)
        })
        .collect();
    let publishers = links.spawn_publishers(&shared, jobs);

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
