//! The publishing side: one raw-client connection and one unsettled sender
//! that fills the queue in stages (a window of confirmed publishes in
//! flight) and probes closed-loop publish -> `accepted` latency at a depth.
//! Every message carries the run id and a sequence number counted across
//! stages and probes, so the drain can check the count exactly.
//!
//! The longest gap between two accepts is measured here, at the client: the
//! accepted count is read after every send and every wait for dispositions,
//! so a gap is the time between two reads that saw it grow. It includes the
//! client's own pauses, so it is an upper bound on the broker's stall.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use ramqp_bench_compare::payload::{self, Stamp};
use ramqp_bench_compare::raw::{Connection, Sender};
use ramqp_bench_compare::report::{self, Percentiles};

use crate::progress::Progress;

/// What one fill stage did.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Stage {
    /// Messages published (and accepted) in the stage.
    pub(crate) messages: u64,
    /// From the first send to the last `accepted`.
    pub(crate) secs: f64,
    /// messages / secs (0 for an empty stage).
    pub(crate) msg_s: f64,
    /// Longest time between two reads that saw the accepted count grow.
    pub(crate) longest_accept_gap_ms: f64,
    /// Gaps longer than the stall threshold.
    pub(crate) gaps_over_threshold: u64,
}

/// The publisher: connection, sender and the running sequence number.
pub(crate) struct Filler {
    conn: Connection,
    sender: Sender,
    run: u32,
    size: usize,
    window: usize,
    stall: Duration,
    /// Messages published and accepted so far (= the next sequence number).
    published: u64,
}

impl Filler {
    /// Connect and attach an unsettled sender to `address`.
    pub(crate) async fn connect(
        url: &str,
        address: &str,
        run: u32,
        size: usize,
        window: usize,
        stall: Duration,
        timeout: Duration,
    ) -> Result<Filler> {
        let mut conn =
            Connection::connect(url, &format!("ramqp-bench-depth-pub-{run:08x}"), timeout)
                .await
                .context("publisher connection")?;
        let sender = conn
            .attach_sender(&format!("depth-sender-{run:08x}"), address, false)
            .await
            .context("attach the publisher")?;
        Ok(Filler {
            conn,
            sender,
            run,
            size,
            window: window.max(1),
            stall,
            published: 0,
        })
    }

    /// Messages published and accepted so far.
    pub(crate) fn published(&self) -> u64 {
        self.published
    }

    fn body(&self, seq: u64) -> Vec<u8> {
        payload::encode(
            Stamp {
                run: self.run,
                publisher: 0,
                seq,
                sent_ns: 0,
            },
            self.size,
        )
    }

    /// Fill up to `checkpoint` messages published in all (a stage of the
    /// fill), showing it as a phase of `progress`.
    pub(crate) async fn fill_to(&mut self, checkpoint: u64, progress: &Progress) -> Result<Stage> {
        let n = checkpoint.saturating_sub(self.published());
        progress.phase(&format!("fill to {checkpoint}"), n);
        let stage = self
            .fill(n, progress)
            .await
            .with_context(|| format!("filling to checkpoint {checkpoint}"))?;
        progress.idle();
        Ok(stage)
    }

    /// Publish `n` messages with up to `window` unsettled in flight and
    /// wait for every `accepted`.
    pub(crate) async fn fill(&mut self, n: u64, progress: &Progress) -> Result<Stage> {
        let accepted_before = self.sender.accepted(&mut self.conn)?;
        let depth_before = self.published;
        let started = Instant::now();
        let mut gaps = Gaps::new(started, accepted_before, self.stall);
        for i in 0..n {
            let seq = depth_before + i;
            let body = self.body(seq);
            self.sender
                .send(&mut self.conn, &body)
                .await
                .with_context(|| format!("fill: publish message #{seq}"))?;
            if self.sender.unsettled(&mut self.conn)? >= self.window {
                self.sender
                    .wait_settled(&mut self.conn, self.window - 1)
                    .await
                    .with_context(|| {
                        format!("fill: accepts around message #{seq} (depth {seq})")
                    })?;
            }
            let accepted = self.sender.accepted(&mut self.conn)?;
            if gaps.observe(accepted) {
                let done = accepted - accepted_before;
                progress.set(done, depth_before + done);
            }
        }
        self.sender
            .wait_settled(&mut self.conn, 0)
            .await
            .context("fill: the last accepts of the stage")?;
        let accepted = self.sender.accepted(&mut self.conn)?;
        gaps.observe(accepted);
        let secs = started.elapsed().as_secs_f64();
        if accepted - accepted_before != n {
            bail!(
                "fill: {} of {n} publishes accepted after the last disposition",
                accepted - accepted_before
            );
        }
        self.published += n;
        progress.set(n, self.published);
        Ok(Stage {
            messages: n,
            secs,
            msg_s: if n > 0 && secs > 0.0 {
                report::round1(n as f64 / secs)
            } else {
                0.0
            },
            longest_accept_gap_ms: (gaps.longest.as_secs_f64() * 10_000.0).round() / 10.0,
            gaps_over_threshold: gaps.over,
        })
    }

    /// `n` publishes one at a time, each waiting for its `accepted`:
    /// publish -> accepted latency at the current depth (which grows by n).
    pub(crate) async fn probe(&mut self, n: u64, progress: &Progress) -> Result<Percentiles> {
        let mut histogram = report::histogram();
        for i in 0..n {
            let seq = self.published;
            let body = self.body(seq);
            let start = Instant::now();
            self.sender
                .send(&mut self.conn, &body)
                .await
                .with_context(|| format!("probe: publish message #{seq}"))?;
            self.sender
                .wait_settled(&mut self.conn, 0)
                .await
                .with_context(|| format!("probe: accept of message #{seq} (depth {seq})"))?;
            let nanos = start.elapsed().as_nanos() as u64;
            histogram
                .record(nanos.max(1))
                .map_err(|e| anyhow::anyhow!("record a probe sample: {e}"))?;
            self.published += 1;
            progress.set(i + 1, self.published);
        }
        Ok(Percentiles::of(&histogram))
    }

    /// Detach and close (a failure is returned, for a warning).
    pub(crate) async fn close(self) -> Result<()> {
        let Filler {
            mut conn, sender, ..
        } = self;
        sender.detach(&mut conn).await?;
        conn.close().await
    }
}

/// The longest time between two reads that saw the accepted count grow.
struct Gaps {
    last_at: Instant,
    last_count: u64,
    longest: Duration,
    threshold: Duration,
    over: u64,
}

impl Gaps {
    fn new(start: Instant, count: u64, threshold: Duration) -> Gaps {
        Gaps {
            last_at: start,
            last_count: count,
            longest: Duration::ZERO,
            threshold,
            over: 0,
        }
    }

    /// True when the count grew.
    fn observe(&mut self, count: u64) -> bool {
        if count <= self.last_count {
            return false;
        }
        let now = Instant::now();
        let gap = now.duration_since(self.last_at);
        self.longest = self.longest.max(gap);
        if gap > self.threshold {
            self.over += 1;
            // When it ended, to find in the brokers' logs what held it.
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            eprintln!(
                "depth: accept gap of {:.1} ms ended at unix ms {unix_ms} (after {count} accepted)",
                gap.as_secs_f64() * 1000.0
            );
        }
        self.last_at = now;
        self.last_count = count;
        true
    }
}
