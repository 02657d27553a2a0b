//! The consuming side: one receiver with a large credit window that takes
//! the queue back to empty, accepting every delivery (the raw client sends
//! consecutive accepts as one ranged disposition with its next read), and
//! checks the count against what was published: missing, duplicated and
//! extra (not ours, or beyond the published range) messages are counted,
//! not fatal, so a recovery that lost or repeated messages is reported.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use ramqp_bench_compare::payload::{self, SeqSet};
use ramqp_bench_compare::raw::{Connection, Delivery, Receiver};
use ramqp_bench_compare::report;

use crate::progress::Progress;

/// How long to listen for a duplicate after the last expected message.
const EXTRA_WAIT: Duration = Duration::from_millis(300);

/// What a drain received.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Drained {
    /// Messages the broker accepted from the bench (what should come back).
    pub(crate) expected: u64,
    /// Deliveries of this run taken (distinct or not).
    pub(crate) received: u64,
    /// Expected messages that never came (within the time-out).
    pub(crate) missing: u64,
    /// Messages of this run delivered more than once.
    pub(crate) duplicates: u64,
    /// Messages of this run beyond the published range.
    pub(crate) extra: u64,
    /// Deliveries that were not this run's (left by someone else).
    pub(crate) foreign: u64,
    /// From before the attach (first credit) to the last message taken.
    pub(crate) secs: f64,
    /// received / secs.
    pub(crate) msg_s: f64,
}

impl Drained {
    /// True when exactly the published messages came back, once each.
    pub(crate) fn exact(&self) -> bool {
        self.missing == 0 && self.duplicates == 0 && self.extra == 0
    }
}

/// Connect and attach the drain's receiver with `credit` (kept topped up).
pub(crate) async fn attach(
    url: &str,
    address: &str,
    run: u32,
    credit: u32,
    timeout: Duration,
) -> Result<(Connection, Receiver)> {
    let mut conn = Connection::connect(url, &format!("ramqp-bench-depth-con-{run:08x}"), timeout)
        .await
        .context("consumer connection")?;
    let receiver = conn
        .attach_receiver(&format!("depth-receiver-{run:08x}"), address, credit)
        .await
        .context("attach the consumer")?;
    Ok((conn, receiver))
}

/// Take deliveries until the `expected` messages of `run` (sequence numbers
/// 0..expected) have all arrived or none came for `idle`; `first` is a
/// delivery already taken (the recovery's first one). Times run from
/// `started` (taken before the receiver was attached, i.e. before the first
/// credit) to the last message of this run taken. Returns the counts.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn drain(
    started: Instant,
    conn: &mut Connection,
    receiver: &Receiver,
    run: u32,
    expected: u64,
    idle: Duration,
    first: Option<Delivery>,
    progress: &Progress,
) -> Result<Drained> {
    let mut last_at = started;
    let mut seen = SeqSet::default();
    let (mut received, mut extra, mut foreign) = (0u64, 0u64, 0u64);
    let mut next = first;
    loop {
        let delivery = match next.take() {
            Some(d) => d,
            None => {
                let wait = if seen.distinct() >= expected {
                    EXTRA_WAIT
                } else {
                    idle
                };
                match receiver
                    .recv_within(conn, wait)
                    .await
                    .context("drain: receive")?
                {
                    Some(d) => d,
                    None => break,
                }
            }
        };
        receiver.accept(conn, &delivery);
        let stamp = delivery.body().ok().and_then(|b| payload::decode(&b));
        match stamp {
            Some(s) if s.run == run && s.seq < expected => {
                received += 1;
                last_at = Instant::now();
                seen.insert(s.seq);
            }
            Some(s) if s.run == run => {
                received += 1;
                last_at = Instant::now();
                extra += 1;
            }
            _ => foreign += 1,
        }
        if received % 1000 == 0 {
            progress.set(seen.distinct(), expected.saturating_sub(seen.distinct()));
        }
    }
    // The accepts of the last deliveries go out now.
    conn.flush()
        .await
        .context("drain: write the last accepts")?;
    // The wait for a duplicate after the last message is not drain time.
    let secs = last_at.duration_since(started).as_secs_f64();
    progress.set(seen.distinct(), expected.saturating_sub(seen.distinct()));
    Ok(Drained {
        expected,
        received,
        missing: seen.missing_below(expected),
        duplicates: seen.duplicates,
        extra,
        foreign,
        secs,
        msg_s: if secs > 0.0 {
            report::round1(received as f64 / secs)
        } else {
            0.0
        },
    })
}
