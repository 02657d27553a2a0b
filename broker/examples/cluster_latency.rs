//! Quorum-queue latency and throughput on a 3-node in-process cluster,
//! beside the physical floor measured in the same run: one small fsync'd
//! append (alone, and three at once as the three nodes flush on one disk)
//! and one loopback TCP round trip. For the closed loop it also prints each
//! node's log-store commits per publish and their mean time (fsync
//! included), which splits the latency into disk and everything else.
//!
//! `cargo run --release -p ramqpd-broker --example cluster_latency -- [samples] [blast]`
//!
//! Client: fe2o3-amqp, connected to the queue's leader. Prints one JSON
//! object on stdout.

use std::io::Write;
use std::time::{Duration, Instant};

use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::{Connection, Sender, Session};
use hdrhistogram::Histogram;
use ramqpd_broker::{BrokerConfig, Cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn percentiles(h: &Histogram<u64>) -> String {
    format!(
        "{{\"p50_us\": {}, \"p90_us\": {}, \"p99_us\": {}, \"p999_us\": {}, \"max_us\": {}}}",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max()
    )
}

/// Median time of a 256-byte append + fdatasync in `dir`.
fn fsync_floor(dir: &std::path::Path, n: usize) -> std::io::Result<Histogram<u64>> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("fsync-probe"))?;
    let mut h = Histogram::<u64>::new(3).map_err(std::io::Error::other)?;
    for _ in 0..n {
        let started = Instant::now();
        file.write_all(&[7u8; 256])?;
        file.sync_data()?;
        let _ = h.record(started.elapsed().as_micros() as u64);
    }
    Ok(h)
}

/// [`fsync_floor`] from three threads at once, each on its own file.
fn fsync_floor_3(dir: &std::path::Path, n: usize) -> std::io::Result<Histogram<u64>> {
    let handles: Vec<_> = (0..3)
        .map(|i| {
            let dir = dir.join(format!("fsync-probe-{i}"));
            std::thread::spawn(move || {
                std::fs::create_dir_all(&dir)?;
                fsync_floor(&dir, n)
            })
        })
        .collect();
    let mut merged = Histogram::<u64>::new(3).map_err(std::io::Error::other)?;
    for handle in handles {
        let h = handle
            .join()
            .map_err(|_| std::io::Error::other("probe thread panicked"))??;
        merged.add(h).map_err(std::io::Error::other)?;
    }
    Ok(merged)
}

/// One node's log-store commits during the closed loop, as JSON.
fn store_delta(
    node: u64,
    before: &store_redb::BatchStatsSnapshot,
    after: &store_redb::BatchStatsSnapshot,
    publishes: usize,
) -> String {
    let d = after.since(before);
    let mean_us = if d.commits == 0 {
        0.0
    } else {
        d.commit_time.as_secs_f64() * 1e6 / d.commits as f64
    };
    format!(
        "{{\"node\": {node}, \"commits_per_publish\": {:.2}, \"mean_commit_us\": {:.0}, \"requests_per_commit\": {:.2}}}",
        d.commits as f64 / publishes.max(1) as f64,
        mean_us,
        d.requests_per_commit()
    )
}

/// Loopback TCP round trips of 256 bytes.
async fn loopback_floor(n: usize) -> std::io::Result<Histogram<u64>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let echo = tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            let mut buf = [0u8; 256];
            while s.read_exact(&mut buf).await.is_ok() {
                if s.write_all(&buf).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut h = Histogram::<u64>::new(3).map_err(std::io::Error::other)?;
    let mut buf = [0u8; 256];
    for _ in 0..n {
        let started = Instant::now();
        s.write_all(&buf).await?;
        s.read_exact(&mut buf).await?;
        let _ = h.record(started.elapsed().as_micros() as u64);
    }
    drop(s);
    let _ = echo.await;
    Ok(h)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let blast: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let cluster = Cluster::start(3, BrokerConfig::default()).await?;
    let first = cluster.node(1).ok_or("node 1")?;
    first.quorum().ensure("lat").await?;
    let leader = cluster.leader_of("lat").ok_or("no leader")?;
    let term_before = cluster
        .node(leader)
        .ok_or("leader")?
        .quorum()
        .get(&ramqpd_broker::queue::QueueAddress::parse("/quorum/lat")?)
        .ok_or("queue")?
        .leader();
    let url = format!("amqp://{}", cluster.addr(leader).ok_or("addr")?);

    let fsync = fsync_floor(cluster.node(leader).ok_or("leader")?.data_dir(), 500)?;
    let fsync3 = fsync_floor_3(cluster.node(leader).ok_or("leader")?.data_dir(), 500)?;
    let rtt = loopback_floor(2000).await?;

    let mut connection = Connection::open("lat", url.as_str()).await?;
    let mut session = Session::begin(&mut connection).await?;
    let mut sender = Sender::attach(&mut session, "tx", "/quorum/lat").await?;
    let body = vec![b'x'; 256];
    // Closed loop: one publish in flight, time until `accepted`.
    let mut closed = Histogram::<u64>::new(3)?;
    let node_ids = [1u64, 2, 3];
    let mut stores_before = Vec::new();
    for i in 0..samples + 200 {
        if i == 200 {
            for id in node_ids {
                stores_before.push(cluster.node(id).ok_or("node")?.quorum().store_stats());
            }
        }
        let started = Instant::now();
        let outcome = sender.send(body.clone()).await?;
        if !matches!(outcome, Outcome::Accepted(_)) {
            return Err(format!("publish not accepted: {outcome:?}").into());
        }
        if i >= 200 {
            let _ = closed.record(started.elapsed().as_micros() as u64);
        }
    }
    let single_rate = 1_000_000.0 / closed.mean();
    let mut stores = Vec::new();
    for (id, before) in node_ids.iter().zip(&stores_before) {
        let after = cluster.node(*id).ok_or("node")?.quorum().store_stats();
        stores.push(store_delta(*id, before, &after, samples));
    }
    // 1,000 unsettled in flight.
    let window = 1000;
    let mut in_flight = std::collections::VecDeque::with_capacity(window);
    let started = Instant::now();
    for _ in 0..blast {
        if in_flight.len() >= window {
            let fut: fe2o3_amqp::link::delivery::DeliveryFut<_> =
                in_flight.pop_front().ok_or("empty")?;
            let outcome: Outcome = tokio::time::timeout(Duration::from_secs(30), fut).await??;
            if !matches!(outcome, Outcome::Accepted(_)) {
                return Err(format!("publish not accepted: {outcome:?}").into());
            }
        }
        in_flight.push_back(sender.send_batchable(body.clone()).await?);
    }
    while let Some(fut) = in_flight.pop_front() {
        let outcome: Outcome = tokio::time::timeout(Duration::from_secs(30), fut).await??;
        if !matches!(outcome, Outcome::Accepted(_)) {
            return Err(format!("publish not accepted: {outcome:?}").into());
        }
    }
    let blast_rate = blast as f64 / started.elapsed().as_secs_f64();
    let leader_after = cluster.leader_of("lat");
    let _ = sender.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    println!(
        "{{\"scenario\": \"quorum x3 in-process, via leader, 256 B, fe2o3-amqp\", \"fsync_256B\": {}, \"fsync_256B_3_at_once\": {}, \"loopback_rtt_256B\": {}, \"publish_to_accepted\": {}, \"log_store_during_closed_loop\": [{}], \"single_in_flight_msg_per_s\": {:.0}, \"window_1000_msg_per_s\": {:.0}, \"ratio\": {:.1}, \"leader_before\": {:?}, \"leader_after\": {:?}}}",
        percentiles(&fsync),
        percentiles(&fsync3),
        percentiles(&rtt),
        percentiles(&closed),
        stores.join(", "),
        single_rate,
        blast_rate,
        blast_rate / single_rate,
        term_before,
        leader_after
    );
    cluster.shutdown().await;
    Ok(())
}
