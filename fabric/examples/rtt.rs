//! Round-trip numbers of the fabric over loopback TCP, two nodes in one
//! process: p50/p99 of one small call at a time, then of 1,000 concurrent
//! calls (with the throughput), then one-way send throughput.
//!
//! `cargo run --release -p ramqpd-fabric --example rtt`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use ramqpd_fabric::{BoxFuture, CallError, Envelope, Fabric, FabricConfig, Handler, NodeId};
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// Echoes calls; counts one-way messages.
struct Echo {
    messages: AtomicU64,
    target: AtomicU64,
    done: Notify,
}

impl Handler for Echo {
    fn call(
        self: Arc<Self>,
        _from: NodeId,
        envelope: Envelope,
    ) -> BoxFuture<'static, Result<Bytes, String>> {
        Box::pin(async move { Ok(envelope.payload) })
    }

    fn message(&self, _from: NodeId, _envelope: Envelope) {
        let n = self.messages.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.target.load(Ordering::Relaxed) {
            self.done.notify_one();
        }
    }
}

fn echo() -> Arc<Echo> {
    Arc::new(Echo {
        messages: AtomicU64::new(0),
        target: AtomicU64::new(u64::MAX),
        done: Notify::new(),
    })
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let any = "127.0.0.1:0".parse()?;
    let a = Fabric::start(FabricConfig::new(1, "rtt", any), echo()).await?;
    let b_handler = echo();
    let b = Fabric::start(FabricConfig::new(2, "rtt", any), b_handler.clone()).await?;
    a.add_peer(2, b.local_addr());
    b.add_peer(1, a.local_addr());
    if !a.wait_connected(2, Duration::from_secs(5)).await {
        return Err("node 1 did not connect to node 2".into());
    }
    let payload = Bytes::from(vec![0x5a; 64]);

    // Warm-up.
    for i in 0..2_000 {
        a.call(2, Envelope::new(i, 1, payload.clone())).await?;
    }

    // One call at a time.
    let n = 20_000;
    let mut h = Histogram::<u64>::new(3)?;
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        a.call(2, Envelope::new(i, 1, payload.clone())).await?;
        h.record(t.elapsed().as_nanos() as u64)?;
    }
    let wall = started.elapsed();
    println!(
        "sequential 64 B calls: n={n} p50={:.1} us p99={:.1} us p99.9={:.1} us max={:.1} us ({:.0} calls/s)",
        us(&h, 0.5),
        us(&h, 0.99),
        us(&h, 0.999),
        h.max() as f64 / 1000.0,
        n as f64 / wall.as_secs_f64()
    );

    // 1,000 concurrent calls per round.
    let rounds = 50;
    let width = 1_000u64;
    let mut h = Histogram::<u64>::new(3)?;
    let mut round_h = Histogram::<u64>::new(3)?;
    let before = a.stats();
    let started = Instant::now();
    for r in 0..rounds {
        let t_round = Instant::now();
        let mut set = JoinSet::new();
        for i in 0..width {
            let call = a.call(2, Envelope::new(r * width + i, 1, payload.clone()));
            set.spawn(async move {
                let t = Instant::now();
                call.await.map(|_| t.elapsed())
            });
        }
        while let Some(res) = set.join_next().await {
            let took: Result<Duration, CallError> = res?;
            h.record(took?.as_nanos() as u64)?;
        }
        round_h.record(t_round.elapsed().as_nanos() as u64)?;
    }
    let wall = started.elapsed();
    let after = a.stats();
    println!(
        "1,000 concurrent 64 B calls x {rounds} rounds: per-call p50={:.1} us p99={:.1} us; round p50={:.2} ms p99={:.2} ms; {:.0} calls/s; {} frames in {} batches",
        us(&h, 0.5),
        us(&h, 0.99),
        us(&round_h, 0.5) / 1000.0,
        us(&round_h, 0.99) / 1000.0,
        (rounds * width) as f64 / wall.as_secs_f64(),
        after.frames_sent - before.frames_sent,
        after.batches_sent - before.batches_sent,
    );

    // One-way sends: queue as fast as the bounded queue allows.
    let total = 500_000u64;
    b_handler.target.store(
        b_handler.messages.load(Ordering::Relaxed) + total,
        Ordering::Relaxed,
    );
    let started = Instant::now();
    let mut sent = 0;
    while sent < total {
        match a.send(2, Envelope::new(sent, 2, payload.clone())) {
            Ok(()) => sent += 1,
            Err(CallError::Backpressure) => tokio::task::yield_now().await,
            Err(e) => return Err(e.into()),
        }
    }
    tokio::time::timeout(Duration::from_secs(60), b_handler.done.notified()).await?;
    let wall = started.elapsed();
    println!(
        "one-way 64 B sends: {total} in {:.2} s = {:.0} msgs/s",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );

    a.shutdown().await;
    b.shutdown().await;
    Ok(())
}
