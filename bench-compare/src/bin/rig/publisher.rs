//! A publisher task: closed loop (as fast as the in-flight window allows)
//! or open loop (one send per tick from the pacer), settling what is in
//! flight before it closes its link and connection.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use fe2o3_amqp::Sender;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use ramqp_bench_compare::amqp::{self, within, Endpoint};
use ramqp_bench_compare::payload::{self, Stamp};
use ramqp_bench_compare::report;

use crate::run::Shared;

pub(crate) struct PublisherDone {
    pub(crate) sent: u64,
    pub(crate) finished_ns: u64,
    pub(crate) send_lag: Option<Histogram<u64>>,
    pub(crate) close_error: Option<String>,
}

impl PublisherDone {
    /// The outcome of publisher `publisher` that sent `sent` messages
    /// (either client): its error, else what it did and how closing went.
    pub(crate) fn of(
        publisher: u32,
        sent: u64,
        finished_ns: u64,
        result: Result<Option<Histogram<u64>>>,
        closed: Result<()>,
    ) -> Result<PublisherDone> {
        Ok(PublisherDone {
            sent,
            finished_ns,
            send_lag: result?,
            close_error: closed
                .err()
                .map(|e| format!("publisher {publisher}: {e:#}")),
        })
    }
}

/// When a publisher finished; a failed one stops the others.
pub(crate) fn finished<T>(shared: &Shared, result: &Result<T>) -> u64 {
    if result.is_err() {
        shared.stop.store(true, Ordering::Relaxed);
    }
    payload::now_ns()
}

/// The body of message `seq` of `publisher`, meant to be sent at `sent_ns`
/// (either client).
pub(crate) fn body(shared: &Shared, publisher: u32, seq: u64, sent_ns: u64) -> Vec<u8> {
    let stamp = Stamp {
        run: shared.run,
        publisher,
        seq,
        sent_ns,
    };
    payload::encode(stamp, shared.size)
}

/// Open loop: record how far the send of a message meant for `intended_ns`
/// ran behind schedule (either client).
pub(crate) fn record_lag(lag: &mut Histogram<u64>, intended_ns: u64) -> Result<()> {
    let behind = payload::now_ns().saturating_sub(intended_ns);
    lag.record(behind.max(1))
        .map_err(|e| anyhow!("record send lag: {e}"))
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
    let message = amqp::message(body(shared, publisher, seq, sent_ns));
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

pub(crate) async fn publish(
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
                            record_lag(&mut lag, intended_ns)?;
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
    let finished_ns = finished(&shared, &result);
    let timeout = shared.timeout;
    let closed = amqp::close_sender(sender, timeout)
        .await
        .and(endpoint.close().await);
    PublisherDone::of(publisher, seq, finished_ns, result, closed)
}
