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

impl ConsumerDone {
    pub(crate) fn new(publishers: usize) -> ConsumerDone {
        ConsumerDone {
            latency: report::histogram(),
            seqs: vec![SeqSet::default(); publishers],
            stale: 0,
            last_delivery_ns: 0,
            close_error: None,
        }
    }

    /// Check and record one body received at `at_ns` (either client):
    /// latency when inside the sample window, its (publisher, sequence);
    /// true when it is one of this run's messages, false (counted as stale)
    /// otherwise. The caller accepts it either way.
    pub(crate) fn take(&mut self, shared: &Shared, body: &[u8], at_ns: u64) -> Result<bool> {
        match payload::decode(body) {
            Some(stamp)
                if stamp.run == shared.run && (stamp.publisher as usize) < self.seqs.len() =>
            {
                let record = shared
                    .sample_window
                    .is_none_or(|(from, to)| at_ns >= from && at_ns < to);
                if record {
                    self.latency
                        .record(at_ns.saturating_sub(stamp.sent_ns).max(1))
                        .map_err(|e| anyhow!("record latency: {e}"))?;
                }
                self.seqs[stamp.publisher as usize].insert(stamp.seq);
                Ok(true)
            }
            _ => {
                self.stale += 1;
                Ok(false)
            }
        }
    }

    /// The consumer's error, else what it saw and how closing went.
    pub(crate) fn finish(mut self, result: Result<()>, closed: Result<()>) -> Result<ConsumerDone> {
        result?;
        self.close_error = closed.err().map(|e| format!("consumer: {e:#}"));
        Ok(self)
    }

    /// Count one of this run's messages as delivered (after its accept).
    pub(crate) fn delivered(&mut self, shared: &Shared, at_ns: u64) {
        self.last_delivery_ns = at_ns;
        shared.delivered.fetch_add(1, Ordering::Relaxed);
    }
}

/// Fail when the publishers are done, messages are still expected and none
/// arrived for the run's timeout.
pub(crate) fn check_stall(shared: &Shared, last_progress: Instant) -> Result<()> {
    let expected = shared.expect_total.load(Ordering::Relaxed);
    if expected != u64::MAX && last_progress.elapsed() >= shared.timeout {
        bail!(
            "stalled: {} of {expected} published messages delivered, none for {:?} (lost or withheld by the broker)",
            shared.delivered.load(Ordering::Relaxed),
            shared.timeout
        );
    }
    Ok(())
}

/// Whether the consumers have everything the publishers sent.
pub(crate) fn all_delivered(shared: &Shared) -> bool {
    shared.delivered.load(Ordering::Relaxed) >= shared.expect_total.load(Ordering::Relaxed)
}

pub(crate) async fn consume(
    shared: Arc<Shared>,
    endpoint: Endpoint,
    mut receiver: Receiver,
    publishers: usize,
) -> Result<ConsumerDone> {
    let mut done = ConsumerDone::new(publishers);
    let poll = Duration::from_millis(200);
    let mut last_progress = Instant::now();
    let result: Result<()> = async {
        loop {
            if all_delivered(&shared) {
                return Ok(());
            }
            let delivery: Delivery<Data> =
                match tokio::time::timeout(poll, receiver.recv::<Data>()).await {
                    Ok(Ok(delivery)) => delivery,
                    Ok(Err(error)) => bail!("receive failed: {error:?}"),
                    Err(_) => {
                        check_stall(&shared, last_progress)?;
                        continue;
                    }
                };
            let at_ns = payload::now_ns();
            last_progress = Instant::now();
            let own = done.take(&shared, &delivery.body().0, at_ns)?;
            within(shared.timeout, "accept", receiver.accept(&delivery)).await?;
            if own {
                done.delivered(&shared, at_ns);
            }
        }
    }
    .await;
    let timeout = shared.timeout;
    let closed = amqp::close_receiver(receiver, timeout)
        .await
        .and(endpoint.close().await);
    done.finish(result, closed)
}
