//! Bring up N quorum queues on a 3-node in-process cluster, check that
//! each serves a publish, then measure the cluster's idle CPU:
//! `cargo run --release -p ramqpd-broker --example many_quorum_queues -- 1000`
//! (optional further arguments: heartbeat interval, election time-out min
//! and max, in ms, to compare Raft timings). It prints the RSS growth and
//! the tokio tasks per group per node once idle.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ramqpd_broker::queue::{Message, PublishConfirm, Queue, QueueEventKind, Sink};
use ramqpd_broker::{BrokerConfig, Cluster};

/// Resident set size of this process, in KiB, from /proc (0 if unknown).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far, from /proc.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    let clock_ticks = 100; // USER_HZ on Linux
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / clock_ticks)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let mut config = BrokerConfig::default();
    let ms = |i: usize| std::env::args().nth(i).and_then(|a| a.parse::<u64>().ok());
    if let (Some(hb), Some(min), Some(max)) = (ms(2), ms(3), ms(4)) {
        config.quorum.heartbeat_interval_ms = hb;
        config.quorum.election_timeout_min_ms = min;
        config.quorum.election_timeout_max_ms = max;
    }
    let heartbeat = config.quorum.heartbeat_interval_ms;
    let cluster = Cluster::start(3, config).await?;
    let rss_empty = rss_kib();
    let tasks_empty = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let started = Instant::now();
    let mut queues = Vec::with_capacity(n);
    for i in 0..n {
        // Spread the creating node (and so, mostly, the leader).
        let node = cluster.node((i % 3) as u64 + 1).ok_or("node missing")?;
        queues.push(node.quorum().ensure(&format!("q{i}")).await?);
    }
    println!("{n} quorum queues up in {:?}", started.elapsed());

    let (sink, mut events) = Sink::channel();
    let mut body = vec![0x00, 0x53, 0x77, 0xa0, 4];
    body.extend_from_slice(b"ping");
    let body = Bytes::from(body);
    let started = Instant::now();
    let mut proposed = 0;
    for (token, queue) in queues.iter().enumerate() {
        // Publish on whichever node leads each queue.
        let leader = queue.leader().ok_or("no leader")?;
        let node = cluster.node(leader).ok_or("leader not running")?;
        let address = queue.address().clone();
        let Some(at_leader) = node.quorum().get(&address) else {
            continue;
        };
        let message = Message {
            bytes: body.clone(),
            header: None,
            header_len: 0,
        };
        at_leader.publish(
            message,
            Some(PublishConfirm {
                sink: sink.clone(),
                tag: 0,
                token: token as u64,
            }),
        )?;
        proposed += 1;
    }
    let mut accepted = 0;
    while accepted < proposed {
        match tokio::time::timeout(Duration::from_secs(30), events.recv()).await {
            Ok(Some(event)) => {
                if let QueueEventKind::Published { outcome, .. } = event.kind {
                    if outcome == ramqpd_broker::queue::Outcome::Accepted {
                        accepted += 1;
                    }
                }
            }
            _ => break,
        }
    }
    println!(
        "{accepted}/{n} queues accepted a publish in {:?}",
        started.elapsed()
    );
    let mut leaders = [0usize; 4];
    for queue in &queues {
        if let Some(l) = queue.leader() {
            leaders[l as usize] += 1;
        }
    }
    println!(
        "leaders per node: 1: {}, 2: {}, 3: {}",
        leaders[1], leaders[2], leaders[3]
    );

    // Idle: nothing but Raft heartbeats.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu_before = cpu_time();
    let wall = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let cpu = cpu_time() - cpu_before;
    println!(
        "idle: {:.1}% of one core over {:?} (3 nodes, {n} groups, heartbeat {} ms)",
        cpu.as_secs_f64() * 100.0 / wall.elapsed().as_secs_f64(),
        wall.elapsed(),
        heartbeat
    );
    let rss_idle = rss_kib();
    let tasks_idle = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    println!(
        "tokio tasks: empty cluster {tasks_empty}, {n} idle groups {tasks_idle}: {:.1} per group per node",
        tasks_idle.saturating_sub(tasks_empty) as f64 / (3 * n.max(1)) as f64
    );
    println!(
        "rss: empty cluster {rss_empty} KiB, {n} idle groups {rss_idle} KiB: {:.1} KiB per group per node",
        rss_idle.saturating_sub(rss_empty) as f64 / (3 * n.max(1)) as f64
    );
    cluster.shutdown().await;
    Ok(())
}
