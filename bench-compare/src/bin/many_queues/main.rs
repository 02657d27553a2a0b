//! `many_queues`: N quorum queues on a 3-process `ramqp-brokerd` cluster
//! (the flags of deploy/local-cluster.sh, data in a temporary folder), and
//! what they cost. One JSON object on stdout:
//!
//! 1. start the three nodes; RSS with no queue;
//! 2. create N queues by attaches (a sender attached and detached), spread
//!    over the nodes, several connections each: seconds, from the cluster's
//!    start and for the attaches alone;
//! 3. every queue serves (publish confirmed, receive, accept), and the
//!    leaders per node (`ramqp_raft_groups_leading` from /metrics);
//! 4. the idle cluster: CPU of the three processes over `--idle-secs`
//!    (/proc utime+stime), elections in that window (per group, growth of
//!    the highest term), RSS and (RSS(N) - RSS(0)) / N per node;
//! 5. graceful stop of node 3 (SIGTERM): seconds until it exited and until
//!    the others lead every group; then its restart: seconds until every
//!    queue serves through it;
//! 6. the leaders balanced again (`--rebalance-wait-secs`), every queue
//!    served once more, and node 1 killed (SIGKILL) right after that
//!    traffic (every group awake, its followers heard their leader a
//!    moment ago): seconds until the others lead every group;
//! 7. node 1 restarted, the leaders balanced again, every group quiet
//!    (`ramqp_raft_groups_quiet`) and quiet for `--quiet-secs`; the node
//!    leading the most groups
//!    killed: seconds until the others lead every group. The difference
//!    from 6 is openraft's leader lease: a follower campaigns only after
//!    the lease (election_timeout_max) and an election time-out since it
//!    last heard its leader; in a quiet group that is long past, and node
//!    liveness tells the successor its leader is gone;
//! 8. the two survivors idle with that node still down: their CPU over
//!    `--idle-secs` after `--settle-secs` (every group led, the dead
//!    node's replicas unreachable), and the elections meanwhile.
//!
//! `--kill-signal STOP` makes both kills a silent death instead (a host
//! crash as the survivors see it: the kernel still takes the node's
//! connections, nothing answers); the node is SIGKILLed once every group
//! is led again.

#![forbid(unsafe_code)]

mod cluster;
mod traffic;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};

use cluster::{cpu_ticks, group_figures, rss_kib, ticks_per_second, Cluster, GroupFigures};

/// N quorum queues on a 3-process cluster: creation, serving, idle cost,
/// restart, graceful stop, fail-over.
#[derive(Debug, Parser)]
#[command(name = "many_queues", version)]
struct Args {
    /// Number of quorum queues.
    #[arg(long, default_value_t = 1000)]
    queues: usize,
    /// Folder with ramqp-brokerd.
    #[arg(long)]
    bin_dir: PathBuf,
    /// First AMQP port (fabric +10, HTTP +20).
    #[arg(long, default_value_t = 7772)]
    base_port: u16,
    /// Connections per node that create and check queues.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Seconds of idle CPU measurement.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Seconds to let the cluster settle before the idle window.
    #[arg(long, default_value_t = 10)]
    settle_secs: u64,
    /// Skip the stop / restart / kill phases.
    #[arg(long)]
    no_failover: bool,
    /// Milliseconds between two scrapes while waiting for every group to
    /// be led again.
    #[arg(long, default_value_t = 100)]
    poll_ms: u64,
    /// Poll the whole `/metrics` (~8 MB at 10,000 queues, rendered by the
    /// node and parsed here) in the fail-over waits instead of the few
    /// KB of `/metrics/node`, as sessions 31-40 did.
    #[arg(long)]
    full_scrapes: bool,
    /// Seconds every group stays quiet before the second kill.
    #[arg(long, default_value_t = 8)]
    quiet_secs: u64,
    /// After each restart, wait at most this long for the leaders to be
    /// balanced again (every node within 10% of a third: the nodes hand
    /// leaderships back to their preferred node, `leader_rebalance_
    /// interval_ms`) before the next kill; 0: do not wait.
    #[arg(long, default_value_t = 90)]
    rebalance_wait_secs: u64,
    /// The signal of the two kills: KILL (a process death: its address
    /// refuses connections at once) or STOP (a silent death).
    #[arg(long, default_value = "KILL")]
    kill_signal: String,
    /// Extra flags for every ramqp-brokerd (space-separated).
    #[arg(long, default_value = "")]
    extra_args: String,
    /// Keep the data folder (printed on stderr).
    #[arg(long)]
    keep: bool,
}

const NODES: u64 = 3;
const PREFIX: &str = "mq";

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let root = std::env::temp_dir().join(format!("ramqp-many-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    eprintln!("many_queues: data in {}", root.display());
    let extra = args
        .extra_args
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut cluster = Cluster::new(
        args.bin_dir.join("ramqp-brokerd"),
        &root,
        args.base_port,
        NODES,
        extra,
    );
    let result = run(&args, &mut cluster).await;
    cluster.kill_all();
    if !args.keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    let mut out = ramqp_bench_compare::report::context(
        "many_queues",
        &format!("{} quorum queues, 3 nodes", args.queues),
        json!({"kind": "ramqp-brokerd x3", "bin_dir": args.bin_dir, "extra_args": cluster.extra_args.join(" ")}),
    );
    match result {
        Ok(Value::Object(fields)) => out.extend(fields),
        Ok(other) => {
            out.insert("result".into(), other);
        }
        Err(e) => {
            eprintln!("many_queues: {e:#}");
            out.insert("error".into(), json!(format!("{e:#}")));
        }
    }
    ramqp_bench_compare::report::emit(&Value::Object(out))
}

fn log(started: Instant, what: &str) {
    eprintln!(
        "many_queues: {:>8.1} s  {what}",
        started.elapsed().as_secs_f64()
    );
}

/// Every figure of each node in `ids` (`/metrics`).
async fn scrape_all(cluster: &Cluster, ids: &[u64]) -> Result<Vec<GroupFigures>> {
    scrape_at(cluster, ids, FULL).await
}

async fn scrape_at(cluster: &Cluster, ids: &[u64], path: &str) -> Result<Vec<GroupFigures>> {
    let mut out = Vec::new();
    for id in ids {
        out.push(group_figures(cluster.node(*id).http, path).await?);
    }
    Ok(out)
}

const FULL: &str = "/metrics";

fn rss_all(cluster: &Cluster) -> Result<Vec<u64>> {
    (1..=NODES)
        .map(|id| rss_kib(cluster.pid(id).context("not running")?))
        .collect()
}

/// How the fail-over waits scrape: how often, and which path.
#[derive(Clone, Copy)]
struct Poll {
    every: Duration,
    path: &'static str,
}

impl Poll {
    /// From the arguments: the node-wide figures are all the waits read.
    fn of(args: &Args) -> Poll {
        Poll {
            every: Duration::from_millis(args.poll_ms),
            path: if args.full_scrapes {
                FULL
            } else {
                "/metrics/node"
            },
        }
    }
}

/// Wait until the nodes `ids` together lead `n` groups; seconds waited.
async fn wait_all_led(
    cluster: &Cluster,
    ids: &[u64],
    n: usize,
    within: Duration,
    poll: Poll,
) -> Result<f64> {
    Ok(led_over_time(cluster, ids, n, within, poll).await?.0)
}

/// The same, and how many they led at each scrape: (seconds, groups).
async fn led_over_time(
    cluster: &Cluster,
    ids: &[u64],
    n: usize,
    within: Duration,
    poll: Poll,
) -> Result<(f64, Vec<(f64, u64)>)> {
    let started = Instant::now();
    let mut trace = Vec::new();
    loop {
        let mut led = 0;
        for id in ids {
            if let Ok(f) = group_figures(cluster.node(*id).http, poll.path).await {
                led += f.leading;
            }
        }
        let at = started.elapsed().as_secs_f64();
        trace.push((round2(at), led));
        if led as usize >= n {
            return Ok((at, trace));
        }
        if started.elapsed() > within {
            bail!("nodes {ids:?} lead {led} of {n} groups after {within:?}");
        }
        tokio::time::sleep(poll.every).await;
    }
}

/// Wait (at most `--rebalance-wait-secs`) until the nodes `ids` lead all
/// `n` groups, each within 10% of its share; seconds waited, or `None`
/// if they did not (a build without the rebalance, or with it off).
async fn wait_balanced(
    args: &Args,
    cluster: &Cluster,
    ids: &[u64],
    poll: Poll,
) -> Result<Option<f64>> {
    let limit = Duration::from_secs(args.rebalance_wait_secs);
    let share = args.queues as f64 / ids.len() as f64;
    let started = Instant::now();
    while !limit.is_zero() {
        let figures = scrape_at(cluster, ids, poll.path).await?;
        let led: u64 = figures.iter().map(|f| f.leading).sum();
        let even = figures
            .iter()
            .all(|f| (f.leading as f64 - share).abs() <= share * 0.1);
        if led as usize >= args.queues && even {
            return Ok(Some(round2(started.elapsed().as_secs_f64())));
        }
        if started.elapsed() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(None)
}

async fn run(args: &Args, cluster: &mut Cluster) -> Result<Value> {
    let n = args.queues;
    let all: Vec<u64> = (1..=NODES).collect();
    let started = Instant::now();
    for id in &all {
        cluster.spawn(*id)?;
    }
    for id in &all {
        cluster.wait_ready(*id, Duration::from_secs(60)).await?;
    }
    let ready_s = started.elapsed().as_secs_f64();
    log(started, "cluster ready");
    let rss_empty = rss_all(cluster)?;
    let ports: Vec<u16> = all.iter().map(|id| cluster.node(*id).amqp).collect();

    let create_s = traffic::create(PREFIX, n, &ports, args.connections).await?;
    let created_since_start_s = started.elapsed().as_secs_f64();
    log(started, &format!("{n} queues created in {create_s:.1} s"));

    let serve_s = traffic::serve_all(
        PREFIX,
        n,
        &ports,
        args.connections,
        Duration::from_secs(600),
    )
    .await?;
    log(started, &format!("every queue served ({serve_s:.1} s)"));
    let figures = scrape_all(cluster, &all).await?;
    let leaders: Vec<u64> = figures.iter().map(|f| f.leading).collect();
    let groups: Vec<u64> = figures.iter().map(|f| f.groups).collect();
    let fair = n as f64 / NODES as f64;
    let imbalance = leaders
        .iter()
        .map(|l| (*l as f64 - fair).abs() / fair)
        .fold(0.0, f64::max);

    let Idle {
        pct: idle_cpu_pct,
        window,
        elections: idle_elections,
    } = idle_window(args, cluster, &all).await?;
    let idle_total: f64 = idle_cpu_pct.iter().sum();
    let rss_full = rss_all(cluster)?;
    let per_group_kib: Vec<f64> = rss_full
        .iter()
        .zip(&rss_empty)
        .map(|(f, e)| round2((*f as f64 - *e as f64) / n.max(1) as f64))
        .collect();
    log(
        started,
        &format!(
            "idle: {idle_cpu_pct:?} % of a core, {idle_elections} elections, RSS {rss_full:?} KiB"
        ),
    );

    let mut out = json!({
        "queues": n,
        "connections_per_node": args.connections,
        "cluster_ready_s": round2(ready_s),
        "create_s": round2(create_s),
        "create_per_s": round2(n as f64 / create_s),
        "created_since_cluster_start_s": round2(created_since_start_s),
        "serve_all_s": round2(serve_s),
        "groups_per_node": groups,
        "leaders_per_node": leaders,
        "leader_imbalance_max_pct": round2(imbalance * 100.0),
        "idle_window_s": round2(window),
        "idle_cpu_pct_of_core_per_node": idle_cpu_pct,
        "idle_cpu_pct_of_core_total": round2(idle_total),
        "idle_elections": idle_elections,
        "rss_kib_empty": rss_empty,
        "rss_kib_with_queues": rss_full,
        "rss_kib_per_group": per_group_kib,
    });
    if args.no_failover {
        return Ok(out);
    }
    let poll = Poll::of(args);

    // Graceful stop of node 3: it hands its leaderships away, then exits.
    let t = Instant::now();
    cluster.signal(3, "TERM")?;
    let exit = cluster.wait_exit(3, Duration::from_secs(120)).await?;
    let stop_exit_s = t.elapsed().as_secs_f64();
    let stop_all_led_s =
        wait_all_led(cluster, &[1, 2], n, Duration::from_secs(120), poll).await? + stop_exit_s;
    log(
        started,
        &format!("node 3 stopped ({exit}) in {stop_exit_s:.1} s"),
    );

    // Restart node 3: until every queue serves through it.
    let t = Instant::now();
    cluster.spawn(3)?;
    cluster.wait_ready(3, Duration::from_secs(120)).await?;
    let restart_ready_s = t.elapsed().as_secs_f64();
    traffic::serve_all(
        PREFIX,
        n,
        &[cluster.node(3).amqp],
        args.connections * 3,
        Duration::from_secs(300),
    )
    .await?;
    let restart_serve_s = t.elapsed().as_secs_f64();
    log(
        started,
        &format!("node 3 back, serving all in {restart_serve_s:.1} s"),
    );
    // Leaders balanced again, then every group woken by traffic, so the
    // kill below finds each follower having just heard its leader.
    let rebalanced_s = wait_balanced(args, cluster, &all, poll).await?;
    traffic::serve_all(
        PREFIX,
        n,
        &ports,
        args.connections,
        Duration::from_secs(300),
    )
    .await?;
    log(
        started,
        &format!("balanced after {rebalanced_s:?} s, every queue served again"),
    );

    // Node 1 killed: until nodes 2 and 3 lead every group.
    let led_by_1 = group_figures(cluster.node(1).http, poll.path)
        .await?
        .leading;
    let t = Instant::now();
    kill(args, cluster, 1).await?;
    wait_all_led(cluster, &[2, 3], n, Duration::from_secs(300), poll).await?;
    let failover_s = t.elapsed().as_secs_f64();
    reap(args, cluster, 1).await?;
    let after_kill = scrape_all(cluster, &[2, 3]).await?;
    log(
        started,
        &format!("node 1 killed: all led again in {failover_s:.1} s"),
    );

    let quiet_kill = quiet_kill(args, cluster, started).await?;

    if let Value::Object(map) = &mut out {
        map.insert("quiet_kill".into(), quiet_kill);
        map.insert("stop_sigterm_exit_s".into(), json!(round2(stop_exit_s)));
        map.insert("stop_exit_status".into(), json!(exit));
        map.insert(
            "stop_all_led_by_others_s".into(),
            json!(round2(stop_all_led_s)),
        );
        map.insert("restart_ready_s".into(), json!(round2(restart_ready_s)));
        map.insert("restart_serve_all_s".into(), json!(round2(restart_serve_s)));
        map.insert("restart_rebalanced_s".into(), json!(rebalanced_s));
        map.insert("kill_node1_led".into(), json!(led_by_1));
        map.insert("kill_failover_all_led_s".into(), json!(round2(failover_s)));
        map.insert("failover_poll_path".into(), json!(poll.path));
        map.insert(
            "leaders_after_kill".into(),
            json!(after_kill.iter().map(|f| f.leading).collect::<Vec<_>>()),
        );
    }
    Ok(out)
}

/// Kill node `id` with `--kill-signal`; after a KILL, wait for its exit.
async fn kill(args: &Args, cluster: &mut Cluster, id: u64) -> Result<()> {
    cluster.signal(id, &args.kill_signal)?;
    if args.kill_signal != "STOP" {
        let _ = cluster.wait_exit(id, Duration::from_secs(10)).await?;
    }
    Ok(())
}

/// After a STOP: the stopped node killed for good (the next phases
/// restart it or run without it).
async fn reap(args: &Args, cluster: &mut Cluster, id: u64) -> Result<()> {
    if args.kill_signal == "STOP" {
        cluster.signal(id, "KILL")?;
        let _ = cluster.wait_exit(id, Duration::from_secs(10)).await?;
    }
    Ok(())
}

/// Phase 7: node 1 back, every group quiet for `--quiet-secs`, then the
/// node leading the most groups killed.
async fn quiet_kill(args: &Args, cluster: &mut Cluster, started: Instant) -> Result<Value> {
    let n = args.queues as u64;
    cluster.spawn(1)?;
    cluster.wait_ready(1, Duration::from_secs(120)).await?;
    let all: Vec<u64> = (1..=NODES).collect();
    let poll = Poll::of(args);
    let path = poll.path;
    let rebalanced_s = wait_balanced(args, cluster, &all, poll).await?;
    let t = Instant::now();
    loop {
        let figures = scrape_at(cluster, &all, path).await?;
        if figures.iter().map(|f| f.quiet).sum::<u64>() >= n {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("not every group quiet after node 1's restart within 300 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let quiet_after_s = t.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(args.quiet_secs)).await;
    let figures = scrape_at(cluster, &all, path).await?;
    let quiet: u64 = figures.iter().map(|f| f.quiet).sum();
    let (victim, led) = all
        .iter()
        .zip(&figures)
        .map(|(id, f)| (*id, f.leading))
        .max_by_key(|(_, led)| *led)
        .context("no node")?;
    let others: Vec<u64> = all.iter().copied().filter(|id| *id != victim).collect();
    let store_before = scrape_at(cluster, &others, path).await?;
    let t = Instant::now();
    kill(args, cluster, victim).await?;
    let (_, led_over) = led_over_time(
        cluster,
        &others,
        args.queues,
        Duration::from_secs(300),
        poll,
    )
    .await?;
    let failover_s = t.elapsed().as_secs_f64();
    reap(args, cluster, victim).await?;
    // What the survivors' log stores did meanwhile: each durable write
    // holding a vote is a redb transaction that folds the journal first.
    let store_after = scrape_at(cluster, &others, path).await?;
    let store: Vec<Value> = store_before
        .iter()
        .zip(&store_after)
        .map(|(b, a)| {
            json!({
                "commits": a.store_commits - b.store_commits,
                "journal_folds": a.store_folds - b.store_folds,
                "commit_s": round2(a.store_commit_s - b.store_commit_s),
            })
        })
        .collect();
    log(
        started,
        &format!("node {victim} killed while quiet ({quiet} of {n} quiet): all led again in {failover_s:.1} s"),
    );
    let degraded = idle_with_a_node_down(args, cluster, &others).await?;
    log(
        started,
        &format!(
            "idle with node {victim} down: {} % of a core, {} elections",
            degraded["cpu_pct_of_core_per_node"], degraded["elections"]
        ),
    );
    Ok(json!({
        "idle_with_the_node_down": degraded,
        "rebalanced_after_restart_s": rebalanced_s,
        "all_quiet_after_restart_s": round2(quiet_after_s),
        "quiet_secs": args.quiet_secs,
        "poll_ms": args.poll_ms,
        "poll_path": path,
        "quiet_at_kill": quiet,
        "node": victim,
        "led": led,
        "failover_all_led_s": round2(failover_s),
        "led_by_the_others_over_time": led_over,
        "survivors_store": store,
    }))
}

/// Phase 8: the survivors of phase 7 idle, the dead node still down:
/// after `--settle-secs`, their CPU over `--idle-secs` and the elections
/// in that window. A group whose follower's node is lost still has a
/// replication stream to it; what that costs while nothing is written
/// is what this measures.
async fn idle_with_a_node_down(args: &Args, cluster: &Cluster, others: &[u64]) -> Result<Value> {
    let idle = idle_window(args, cluster, others).await?;
    Ok(json!({
        "settle_s": args.settle_secs,
        "window_s": round2(idle.window),
        "cpu_pct_of_core_per_node": idle.pct,
        "cpu_pct_of_core_total": round2(idle.pct.iter().sum()),
        "elections": idle.elections,
    }))
}

/// What the nodes did in an idle window.
struct Idle {
    /// CPU of each node, % of one core.
    pct: Vec<f64>,
    /// The window's length, seconds.
    window: f64,
    /// Elections in it (growth of each group's highest term).
    elections: u64,
}

/// After `--settle-secs`, the nodes `ids` over `--idle-secs`: their CPU
/// (/proc utime+stime) and the elections meanwhile.
async fn idle_window(args: &Args, cluster: &Cluster, ids: &[u64]) -> Result<Idle> {
    tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
    let before = scrape_all(cluster, ids).await?;
    let pids: Vec<u32> = ids.iter().filter_map(|id| cluster.pid(*id)).collect();
    let cpu0: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect::<Result<_>>()?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
    let cpu1: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect::<Result<_>>()?;
    let window = t0.elapsed().as_secs_f64();
    let after = scrape_all(cluster, ids).await?;
    let tick = ticks_per_second();
    let pct = cpu0
        .iter()
        .zip(&cpu1)
        .map(|(a, b)| round2((b - a) as f64 / tick / window * 100.0))
        .collect();
    Ok(Idle {
        pct,
        window,
        elections: cluster::elections(&before, &after),
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
