//! Publish straight into a single-node quorum queue (no AMQP client) with
//! many publishes in flight, and report the rate and how many log entries
//! each fsync carried: `cargo run --release -p ramqpd-broker --example
//! quorum_publish_rate -- 20000`.

use std::time::Instant;

use bytes::Bytes;
use ramqpd_broker::queue::{Message, PublishConfirm, Queue, QueueEventKind, Sink};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let broker = ramqpd_broker::Broker::start(ramqpd_broker::BrokerConfig::default()).await?;
    let queue = broker.quorum().ensure("rate").await?;
    // An amqp-value section with a 250-byte binary body.
    let mut body = vec![0x00, 0x53, 0x77, 0xa0, 250];
    body.extend_from_slice(&[7u8; 250]);
    let body = Bytes::from(body);
    let (sink, mut events) = Sink::channel();
    let before = broker.quorum().store_stats();
    let started = Instant::now();
    for token in 0..n as u64 {
        let message = Message {
            bytes: body.clone(),
            header: None,
            header_len: 0,
        };
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: 0,
            token,
        };
        queue.publish(message, Some(confirm))?;
    }
    let mut accepted = 0;
    while accepted < n {
        match events.recv().await {
            Some(event) => {
                if let QueueEventKind::Published { .. } = event.kind {
                    accepted += 1;
                }
            }
            None => break,
        }
    }
    let elapsed = started.elapsed();
    let stats = broker.quorum().store_stats();
    // Closed loop: one publish in flight, time until its outcome.
    let closed_before = broker.quorum().store_stats();
    let mut samples = Vec::with_capacity(1000);
    for token in 0..1000u64 {
        let message = Message {
            bytes: body.clone(),
            header: None,
            header_len: 0,
        };
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: 0,
            token,
        };
        let one = Instant::now();
        queue.publish(message, Some(confirm))?;
        while let Some(event) = events.recv().await {
            if let QueueEventKind::Published { .. } = event.kind {
                break;
            }
        }
        samples.push(one.elapsed());
    }
    samples.sort();
    let closed = broker.quorum().store_stats().since(&closed_before);
    println!(
        "closed loop publish -> committed (no AMQP): p50 {:?}, p99 {:?}; log store: {} commits, mean {:?} each (fsync included)",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
        closed.commits,
        closed.commit_time / closed.commits.max(1) as u32
    );
    println!(
        "{n} publishes in {elapsed:?}: {:.0} msg/s; {} commits, {:.1} entries per commit",
        n as f64 / elapsed.as_secs_f64(),
        stats.commits - before.commits,
        (stats.entries - before.entries) as f64 / (stats.commits - before.commits).max(1) as f64
    );
    broker.shutdown().await;
    Ok(())
}
