//! The rig's publisher and consumer tasks on the bench's raw client
//! (`ramqp_bench_compare::raw`, on broker::codec), doing what the fe2o3
//! tasks do (`publisher.rs`, `consumer.rs`: same bodies, checks, counters and
//! latency) with the raw client's batching:
//!
//! * closed loop: sends are buffered and written once per 64 KiB, or when
//!   the in-flight window is full (the wait flushes); a message's time stamp
//!   is taken when it is queued in the write buffer;
//! * open loop: every send is written at once, and between ticks the task
//!   reads the broker's dispositions (`Connection::input`);
//! * consumers: accepts go out as ranged dispositions with the next read.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use ramqp_bench_compare::payload;
use ramqp_bench_compare::raw::{Connection, Receiver, Sender};
use ramqp_bench_compare::report;

use crate::consumer::{all_delivered, check_stall, ConsumerDone};
use crate::publisher::{body, finished, record_lag, PublisherDone};
use crate::run::Shared;

/// Add the accepts that arrived since the last call to `published`.
fn count_accepted(
    shared: &Shared,
    sender: &Sender,
    conn: &mut Connection,
    counted: &mut u64,
) -> Result<()> {
    let accepted = sender.accepted(conn)?;
    shared
        .published
        .fetch_add(accepted.saturating_sub(*counted), Ordering::Relaxed);
    *counted = accepted;
    Ok(())
}

/// Queue message `seq` (meant for `sent_ns`), first waiting for room in the
/// in-flight window when publishing unsettled.
async fn send_one(
    shared: &Shared,
    publisher: u32,
    sender: &Sender,
    conn: &mut Connection,
    seq: u64,
    sent_ns: u64,
) -> Result<()> {
    if !shared.presettled && sender.unsettled(conn)? >= shared.window {
        sender
            .wait_settled(conn, shared.window - 1)
            .await
            .map_err(|e| anyhow!("publisher {publisher}: message #{seq}: {e:#}"))?;
    }
    let message = body(shared, publisher, seq, sent_ns);
    sender
        .send(conn, &message)
        .await
        .map_err(|e| anyhow!("publisher {publisher}: send message #{seq}: {e:#}"))?;
    if shared.presettled {
        shared.published.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

pub(crate) async fn publish(
    shared: Arc<Shared>,
    publisher: u32,
    mut conn: Connection,
    sender: Sender,
    quota: Option<u64>,
    ticks: Option<mpsc::UnboundedReceiver<u64>>,
) -> Result<PublisherDone> {
    let mut seq = 0u64;
    let mut counted = 0u64;
    let result: Result<Option<Histogram<u64>>> = async {
        match ticks {
            None => {
                // Closed loop: as fast as credit and the window allow.
                while !shared.stop.load(Ordering::Relaxed) && quota.is_none_or(|q| seq < q) {
                    send_one(&shared, publisher, &sender, &mut conn, seq, payload::now_ns())
                        .await?;
                    count_accepted(&shared, &sender, &mut conn, &mut counted)?;
                    seq += 1;
                }
                Ok(None)
            }
            Some(mut ticks) => {
                // Open loop: one send per tick, written at once; between
                // ticks, take in the broker's dispositions.
                let mut lag = report::histogram();
                let mut progress = Instant::now();
                loop {
                    conn.flush().await?;
                    let waiting = !shared.presettled && sender.unsettled(&mut conn)? > 0;
                    let stalled = tokio::time::Instant::from_std(progress + shared.timeout);
                    tokio::select! {
                        biased;
                        input = conn.input() => {
                            input?;
                            count_accepted(&shared, &sender, &mut conn, &mut counted)?;
                            progress = Instant::now();
                        }
                        tick = ticks.recv() => {
                            let Some(intended_ns) = tick else { break };
                            send_one(&shared, publisher, &sender, &mut conn, seq, intended_ns)
                                .await?;
                            record_lag(&mut lag, intended_ns)?;
                            seq += 1;
                            if !waiting {
                                progress = Instant::now();
                            }
                        }
                        _ = tokio::time::sleep_until(stalled), if waiting => {
                            bail!(
                                "publisher {publisher}: no disposition for {:?} with {} message(s) in flight",
                                shared.timeout,
                                sender.unsettled(&mut conn)?
                            );
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
            let settled = if shared.presettled {
                conn.flush().await
            } else {
                sender.wait_settled(&mut conn, 0).await
            };
            settled
                .and_then(|()| count_accepted(&shared, &sender, &mut conn, &mut counted))
                .map(|()| lag)
                .map_err(|e| anyhow!("publisher {publisher}: settling the last messages: {e:#}"))
        }
        Err(error) => Err(error),
    };
    let finished_ns = finished(&shared, &result);
    let closed = match sender.detach(&mut conn).await {
        Ok(()) => conn.close().await,
        Err(error) => Err(error),
    };
    PublisherDone::of(publisher, seq, finished_ns, result, closed)
}

pub(crate) async fn consume(
    shared: Arc<Shared>,
    mut conn: Connection,
    receiver: Receiver,
    publishers: usize,
) -> Result<ConsumerDone> {
    let mut done = ConsumerDone::new(publishers);
    let poll = Duration::from_millis(200);
    let mut last_progress = Instant::now();
    let result: Result<()> = async {
        while !all_delivered(&shared) {
            let Some(delivery) = receiver.recv_within(&mut conn, poll).await? else {
                check_stall(&shared, last_progress)?;
                continue;
            };
            let at_ns = payload::now_ns();
            last_progress = Instant::now();
            let own = done.take(&shared, &delivery.body()?, at_ns)?;
            receiver.accept(&mut conn, &delivery);
            if own {
                done.delivered(&shared, at_ns);
            }
        }
        conn.flush().await
    }
    .await;
    let closed = match receiver.detach(&mut conn).await {
        Ok(()) => conn.close().await,
        Err(error) => Err(error),
    };
    done.finish(result, closed)
}
