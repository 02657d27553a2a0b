//! Rejoin mode (`--rejoin`): a follower whose data directory is lost
//! rejoins a deep paged quorum queue, catches up, and its memory stays
//! bounded while it does. The bench starts a 3-node cluster of
//! `ramqp-brokerd` processes itself (`cluster.rs`), fills the queue to the
//! last checkpoint through its leader (`fill.rs`), SIGKILLs a follower,
//! deletes its whole data dir and starts it again with the same flags
//! (node id, ports, peers). From that restart the follower's RSS and data
//! dir size (and the leader's RSS) are sampled every `--sample-ms` by a
//! task of their own, until it has caught up: `ramqp-ctl status` on the
//! follower reports every message in the queue (`ready` = the messages
//! accepted) and an applied index equal to the one the leader reports
//! right after. Its log says whether (and when) it installed a streamed
//! snapshot. Then the queue's leadership is moved to it (`ramqp-ctl
//! move-leadership`) and the whole queue is drained through it
//! (`drain.rs`), checking that every message comes back exactly once.
//!
//! ok = every message back once, through the rejoined node as the leader,
//! and its peak RSS within `--rss-limit-mib` both while catching up and
//! while serving the drain. The leader's RSS meanwhile is reported beside
//! it (`leader_rss_within_limit`), not part of ok. A follower that does not catch up (time-out,
//! exit) is a result too: the JSON is written, then the bin fails.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use broker::admin::QueueStatus;
use ramqp_bench_compare::{raw, report, target};

use crate::catch_up::{catch_up, layout, ms, peak, timeline, Sample, Sampler};
use crate::cluster::Cluster;
use crate::drain::{self, Drained};
use crate::fill::Filler;
use crate::footprint::Watched;
use crate::progress::Progress;
use crate::Args;

/// Nodes in the cluster.
const NODES: u64 = 3;

/// Run the rejoin scenario and print its JSON; fails unless ok.
pub(crate) async fn run(args: &Args, work: &Path, run: u32, checkpoints: &[u64]) -> Result<()> {
    // Dropping the scenario's future on a signal drops the cluster, which
    // kills every node; the caller then deletes the work dir.
    let result = tokio::select! {
        result = scenario(args, work, run, checkpoints) => result?,
        signal = interrupted() => bail!("interrupted by {signal}; the cluster was killed"),
    };
    let ok = result.get("ok").and_then(Value::as_bool) == Some(true);
    report::emit(&result)?;
    if !ok {
        bail!(
            "rejoin: not ok: {}",
            result.get("why_not").cloned().unwrap_or(Value::Null)
        );
    }
    Ok(())
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = ctrl_c => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        Err(_) => {
            ctrl_c.await;
            "SIGINT"
        }
    }
}

async fn scenario(args: &Args, work: &Path, run: u32, checkpoints: &[u64]) -> Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let brokerd = args.brokerd.clone().context("--rejoin needs --brokerd")?;
    let ctl = match &args.ctl {
        Some(ctl) => ctl.clone(),
        None => brokerd.with_file_name("ramqp-ctl"),
    };
    if !ctl.is_file() {
        bail!("{} not found (give --ctl)", ctl.display());
    }
    let address = args.address.as_str();
    let every = Duration::from_millis(args.sample_ms.max(10));
    eprintln!(
        "depth: rejoin: starting {NODES} ramqp-brokerd nodes (AMQP {}.., fabric {}..) in {}",
        args.base_port,
        args.base_port + 10,
        work.display()
    );
    let mut cluster = Cluster::start(&brokerd, &ctl, work, args.base_port, NODES, timeout).await?;

    // The queue exists once a link attaches; then fill through its leader.
    let stall = Duration::from_millis(args.stall_ms);
    let url = |cluster: &Cluster, id: u64| -> Result<String> {
        Ok(format!("amqp://{}", cluster.node(id)?.amqp))
    };
    let connect = |url: String| async move {
        Filler::connect(&url, address, run, args.size, args.window, stall, timeout).await
    };
    let mut filler = connect(url(&cluster, 1)?).await?;
    let leader = wait_leader(&cluster, 1, address, None, timeout).await?;
    if leader != 1 {
        filler.close().await.context("the declaring publisher")?;
        filler = connect(url(&cluster, leader)?).await?;
    }
    eprintln!("depth: rejoin: node {leader} leads {address}; filling through it");
    let all = Watched {
        pids: cluster
            .nodes
            .iter()
            .map(|n| cluster.process(n.id).map(|p| p.pid))
            .collect::<Result<_>>()?,
        data_dirs: cluster.nodes.iter().map(|n| n.data_dir.clone()).collect(),
    };
    let progress = Progress::start();
    let mut rows = Vec::new();
    for &checkpoint in checkpoints {
        let stage = filler.fill_to(checkpoint, &progress).await?;
        let footprint = all.sample();
        eprintln!(
            "depth: rejoin: checkpoint {checkpoint}: fill {:.0} msg/s, longest accept gap {:.1} ms; RSS per node {:?} KiB; {}",
            stage.msg_s, stage.longest_accept_gap_ms, footprint.rss_kib_per_pid, footprint.line()
        );
        rows.push(json!({ "checkpoint": checkpoint, "depth": filler.published(), "fill": stage, "footprint": footprint.to_json() }));
    }
    let published = filler.published();
    let mut close_errors = Vec::new();
    if let Err(e) = filler.close().await {
        close_errors.push(format!("publisher: {e:#}"));
    }

    // The follower, killed and wiped.
    let queue = cluster
        .queue(leader, address)
        .await?
        .with_context(|| format!("node {leader} does not know {address}"))?;
    if queue.leader != Some(leader) {
        bail!(
            "the leadership of {address} moved during the fill ({leader} -> {:?})",
            queue.leader
        );
    }
    let follower = *queue
        .members
        .iter()
        .find(|m| **m != leader)
        .with_context(|| format!("{address} has no follower: members {:?}", queue.members))?;
    let before = cluster.queue(follower, address).await?;
    let follower_dir = cluster.node(follower)?.data_dir.clone();
    let follower_before = Watched {
        pids: vec![cluster.process(follower)?.pid],
        data_dirs: vec![follower_dir.clone()],
    }
    .sample();
    eprintln!(
        "depth: rejoin: {published} messages in {address}; killing follower node {follower} ({}) with SIGKILL and deleting {}",
        follower_before.line(),
        follower_dir.display()
    );
    let (kill_took, exit_status) = cluster.kill(follower).await?;
    let wiped_bytes = cluster.wipe(follower)?;
    let t0 = cluster.spawn(follower)?;
    let leader_pid = cluster.process(leader)?.pid;
    let sampler = Sampler::start(
        t0,
        cluster.process(follower)?.pid,
        follower_dir.clone(),
        leader_pid,
        every,
    );
    eprintln!("depth: rejoin: node {follower} restarted with the same flags (pid {}); sampling its RSS every {} ms", cluster.process(follower)?.pid, every.as_millis());
    let limit = Duration::from_secs(args.catch_up_limit_secs);
    let catch = catch_up(
        &mut cluster,
        follower,
        leader,
        address,
        published as usize,
        t0,
        limit,
        every,
        &sampler,
    )
    .await;
    let caught_at = Instant::now();
    let follower_dir_at_catch_up = layout(&follower_dir);

    // Leadership to the rejoined node, then the whole queue through it.
    let mut moved = json!(null);
    let mut drained: Option<Result<Drained>> = None;
    let mut leads = false;
    if catch.caught_up {
        let (attempts, took) = move_to(&cluster, leader, address, follower, timeout).await;
        leads = took.is_some();
        moved = json!({ "attempts": attempts, "to_leading_ms": took.map(ms) });
        eprintln!("depth: rejoin: draining {published} through node {follower}");
        drained = Some(
            drain_through(
                &url(&cluster, follower)?,
                args,
                run,
                published,
                &progress,
                &mut close_errors,
            )
            .await,
        );
    }
    drop(progress);
    let samples = sampler.stop();
    let after = match cluster.process(follower) {
        Ok(p) if catch.caught_up => {
            let watched = Watched {
                pids: vec![p.pid],
                data_dirs: vec![follower_dir.clone()],
            };
            let settle = Duration::from_secs(args.settle_secs);
            let readings = watched.sample_for(settle, Duration::from_millis(500)).await;
            let last = readings.last().map(|f| f.to_json());
            json!({ "secs": args.settle_secs, "last": last, "data_dir": layout(&follower_dir) })
        }
        _ => json!(null),
    };
    let log_tail = cluster
        .process(follower)
        .map(|p| p.log_tail())
        .unwrap_or_default();
    close_errors.extend(cluster.kill_all().await);
    if let Some(keep) = &args.keep_logs {
        if let Err(e) = keep_logs(work, keep) {
            close_errors.push(format!("keeping the logs: {e:#}"));
        }
    }

    // The result.
    let caught_ms = catch.caught_up.then(|| ms(caught_at - t0));
    let (during, serving): (Vec<Sample>, Vec<Sample>) = samples
        .iter()
        .partition(|s| caught_ms.is_none_or(|c| s.t_ms <= c));
    let limit_kib = args.rss_limit_mib * 1024;
    let peak_catch = peak(&during);
    let peak_serving = peak(&serving);
    let leader_peak = during.iter().filter_map(|s| s.leader_rss_kib).max();
    let drain_ok = matches!(&drained, Some(Ok(d)) if d.exact() && d.received == published);
    let within = |p: Option<(u64, f64)>| p.is_some_and(|(kib, _)| kib <= limit_kib);
    let mut why_not = Vec::new();
    if !catch.caught_up {
        why_not.push(format!(
            "node {follower} did not catch up: {}",
            catch.outcome
        ));
    }
    if !within(peak_catch) {
        why_not.push(format!(
            "peak RSS while catching up {:?} KiB over {} MiB",
            peak_catch.map(|p| p.0),
            args.rss_limit_mib
        ));
    }
    if catch.caught_up && !within(peak_serving) {
        why_not.push(format!(
            "peak RSS while serving {:?} KiB over {} MiB",
            peak_serving.map(|p| p.0),
            args.rss_limit_mib
        ));
    }
    if catch.caught_up && !leads {
        why_not.push(format!("node {follower} did not become the leader"));
    }
    if catch.caught_up && !drain_ok {
        why_not.push("the drain did not return exactly the accepted messages".into());
    }
    let ok = why_not.is_empty();
    let described = json!({
        "kind": "3 ramqp-brokerd processes started by the bench (--rejoin)",
        "broker": brokerd.display().to_string(),
        "ctl": ctl.display().to_string(),
        "address": address,
        "nodes": cluster.nodes.iter().map(|n| json!({"id": n.id, "amqp": n.amqp.to_string(), "fabric": n.fabric.to_string(), "data_dir": n.data_dir.display().to_string()})).collect::<Vec<_>>(),
    });
    let mut result = report::context(
        "depth",
        &format!("depth.{}.rejoin", target::queue_kind(address)),
        described,
    );
    result.insert("client".into(), json!(raw::client_stack()));
    result.insert("settings".into(), json!({
        "checkpoints": checkpoints, "size_bytes": args.size, "window": args.window, "stall_ms": args.stall_ms,
        "drain_credit": args.credit, "timeout_ms": args.timeout_ms, "sample_ms": every.as_millis() as u64,
        "catch_up_limit_secs": args.catch_up_limit_secs, "rss_limit_mib": args.rss_limit_mib, "base_port": args.base_port,
    }));
    result.insert("rss_scope".into(), json!("VmRSS of the rejoined follower's ramqp-brokerd process (/proc/PID/status), sampled by a task every sample_ms from its restart; leader_rss_kib: the same of the node that led while it caught up"));
    result.insert("checkpoints".into(), Value::Array(rows));
    result.insert("messages".into(), json!(published));
    result.insert("leader".into(), json!(leader));
    result.insert("follower".into(), json!(follower));
    result.insert("before_kill".into(), json!({ "follower": before.map(queue_json), "leader": queue_json(queue), "follower_footprint": follower_before.to_json() }));
    result.insert("kill".into(), json!({ "signal": "SIGKILL", "stop_ms": ms(kill_took), "exit_status": exit_status, "data_dir_bytes_deleted": wiped_bytes }));
    result.insert("catch_up".into(), json!({
        "caught_up": catch.caught_up,
        "outcome": catch.outcome,
        "condition": "ramqp-ctl status on the follower: ready == messages and applied_index == the leader's applied_index (asked right after)",
        "restart_to_listening_ms": catch.listening_ms,
        "restart_to_caught_up_ms": caught_ms,
        "restart_to_snapshot_installed_ms": catch.installed_ms,
        "snapshot_installed": catch.installed_ms.is_some(),
        "follower": catch.follower.map(queue_json),
        "leader": catch.leader.map(queue_json),
        "status_polls": catch.polls,
        "ctl_errors": catch.ctl_errors,
        "last_ctl_error": catch.last_ctl_error,
        "peak_rss_kib": peak_catch.map(|p| p.0),
        "peak_rss_mib": peak_catch.map(|p| report::round1(p.0 as f64 / 1024.0)),
        "peak_rss_at_ms": peak_catch.map(|p| p.1),
        "peak_data_dir_bytes": during.iter().filter_map(|s| s.data_dir_bytes).max(),
        "leader_peak_rss_kib": leader_peak,
        "leader_rss_within_limit": leader_peak.map(|k| k <= limit_kib),
        "data_dir_at_caught_up": follower_dir_at_catch_up,
        "timeline": timeline(&during),
    }));
    result.insert("move_leadership".into(), moved);
    result.insert("drain".into(), match &drained {
        Some(Ok(d)) => json!({ "through_node": follower, "served_by_rejoined_leader": leads, "result": d, "exact": d.exact() && d.received == published }),
        Some(Err(e)) => json!({ "through_node": follower, "error": format!("{e:#}") }),
        None => json!(null),
    });
    result.insert(
        "serving".into(),
        json!({
            "peak_rss_kib": peak_serving.map(|p| p.0),
            "peak_rss_mib": peak_serving.map(|p| report::round1(p.0 as f64 / 1024.0)),
            "peak_rss_at_ms": peak_serving.map(|p| p.1),
            "old_leader_peak_rss_kib": serving.iter().filter_map(|s| s.leader_rss_kib).max(),
            "after_drain": after,
            "timeline": timeline(&serving),
        }),
    );
    result.insert("follower_log_tail".into(), json!(log_tail));
    result.insert("close_errors".into(), json!(close_errors));
    result.insert("ok".into(), json!(ok));
    result.insert("why_not".into(), json!(why_not));
    eprintln!(
        "depth: rejoin: {published} messages; node {follower} {} in {}; peak RSS {} MiB while catching up, {} MiB while serving (limit {} MiB; the leader's peak meanwhile {} MiB); drain {}; ok {ok}",
        if catch.caught_up { "caught up" } else { "DID NOT catch up" },
        caught_ms.map_or(catch.outcome.clone(), |c| format!("{:.1} s", c / 1000.0)),
        peak_catch.map_or("n/a".into(), |p| format!("{:.1}", p.0 as f64 / 1024.0)),
        peak_serving.map_or("n/a".into(), |p| format!("{:.1}", p.0 as f64 / 1024.0)),
        args.rss_limit_mib,
        leader_peak.map_or("n/a".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
        match &drained {
            Some(Ok(d)) => format!("{} of {published} in {:.1} s (missing {}, duplicates {}, extra {})", d.received, d.secs, d.missing, d.duplicates, d.extra),
            Some(Err(e)) => format!("failed: {e:#}"),
            None => "not run".into(),
        },
    );
    Ok(Value::Object(result))
}

/// Ask the queue's leader (first `from`) to hand it to `to` until `to`
/// leads, a few tries within 60 s; every answer, and how long it took.
async fn move_to(
    cluster: &Cluster,
    from: u64,
    address: &str,
    to: u64,
    timeout: Duration,
) -> (Vec<Value>, Option<Duration>) {
    let started = Instant::now();
    let mut attempts = Vec::new();
    let mut ask = from;
    while started.elapsed() < Duration::from_secs(60) {
        let answer = cluster
            .move_leadership(ask, address, to)
            .await
            .map_err(|e| format!("{e:#}"));
        eprintln!(
            "depth: rejoin: move-leadership of {address} from node {ask} to node {to}: {answer:?}"
        );
        attempts.push(json!({ "at_ms": ms(started.elapsed()), "asked": ask, "answer": answer }));
        let wait = timeout.clamp(Duration::from_secs(1), Duration::from_secs(5));
        match wait_leader(cluster, to, address, None, wait).await {
            Ok(l) if l == to => return (attempts, Some(started.elapsed())),
            Ok(l) => ask = l,
            Err(_) => ask = from,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        // It may have become the leader meanwhile, by its own election.
        if let Ok(Some(QueueStatus {
            leader: Some(l), ..
        })) = cluster.queue(to, address).await
        {
            if l == to {
                return (attempts, Some(started.elapsed()));
            }
            ask = l;
        }
    }
    (attempts, None)
}

/// Copy the nodes' logs (`<work>/*.log`, `*.out`) into `keep`.
fn keep_logs(work: &Path, keep: &Path) -> Result<()> {
    std::fs::create_dir_all(keep).with_context(|| format!("create {}", keep.display()))?;
    for entry in std::fs::read_dir(work).with_context(|| format!("list {}", work.display()))? {
        let path = entry.context("list the work dir")?.path();
        if path.extension().is_some_and(|e| e == "log" || e == "out") {
            if let Some(name) = path.file_name() {
                std::fs::copy(&path, keep.join(name))
                    .with_context(|| format!("copy {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Ask node `ask` until it names a leader of `address` (`want`: that one).
async fn wait_leader(
    cluster: &Cluster,
    ask: u64,
    address: &str,
    want: Option<u64>,
    limit: Duration,
) -> Result<u64> {
    let deadline = Instant::now() + limit;
    loop {
        let last = match cluster.queue(ask, address).await {
            Ok(Some(QueueStatus {
                leader: Some(l), ..
            })) if want.is_none_or(|w| w == l) => return Ok(l),
            Ok(q) => format!("leader {:?}", q.map(|q| q.leader)),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() >= deadline {
            bail!(
                "node {ask} names no leader{} of {address} within {limit:?}; last: {last}",
                want.map_or(String::new(), |w| format!(" {w}"))
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn drain_through(
    url: &str,
    args: &Args,
    run: u32,
    published: u64,
    progress: &Progress,
    errors: &mut Vec<String>,
) -> Result<Drained> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let started = Instant::now();
    let (mut conn, receiver) = drain::attach(url, &args.address, run, args.credit, timeout).await?;
    progress.phase("drain through the rejoined node", published);
    let drained = drain::drain(
        started, &mut conn, &receiver, run, published, timeout, None, progress,
    )
    .await;
    progress.idle();
    if let Err(e) = receiver.detach(&mut conn).await {
        errors.push(format!("consumer detach: {e:#}"));
    }
    if let Err(e) = conn.close().await {
        errors.push(format!("consumer close: {e:#}"));
    }
    drained
}

fn queue_json(q: QueueStatus) -> Value {
    json!({ "leader": q.leader, "members": q.members, "ready": q.ready, "unsettled": q.unsettled, "applied_index": q.applied_index, "term": q.term })
}
