//! A consumer task: receives and accepts until the run's expected total
//! arrived, recording latency in the sample window and every (publisher,
//! sequence) seen, and counting stale messages from other runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use fe2o3_amqp::link::delivery::Delivery;
use fe2o3_amqp::types::messaging::Data;
use fe2o3_amqp::Receiver;
use hdrhistogram::Histogram;

use ramqp_bench_compare::amqp::{self, within, Endpoint};
use ramqp_bench_compare::payload::{self, SeqSet};
use ramqp_bench_compare::report;

use crate::run::Shared;

pub(crate) struct ConsumerDone {
    pub(crate) latency: Histogram<u64>,
    pub(crate) seqs: Vec<SeqSet>,
    pub(crate) stale: u64,
    pub(crate) last_delivery_ns: u64,
    pub(crate) close_error: Option<String>,
}

pub(crate) async fn consume(
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
