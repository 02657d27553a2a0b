//! The `latency` trial with `--client raw`: the same closed loop and blast
//! as the fe2o3 path (same messages, checks, credit, window and JSON), on
//! the bench's own client (`ramqp_bench_compare::raw`, on broker::codec).
//!
//! Per message it does what the fe2o3 path asks fe2o3 to do: a closed-loop
//! publish is written at once (`flush`), with `--confirm` it waits for the
//! broker's `accepted`; the consumer's accept is written at once in the
//! closed loop. In the blast, frames are batched (one write per 64 KiB) and
//! the drain's accepts go out as ranged dispositions with each read.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use ramqp_bench_compare::payload::{self, SeqSet, Stamp};
use ramqp_bench_compare::raw::{Connection, Delivery, Receiver, Sender};
use ramqp_bench_compare::report;
use ramqp_bench_compare::target::Target;

use super::{print_blast, print_loop, trial_json, Args, Blast, Checks};

/// Take the next delivery of this run, accepting and counting stale ones.
async fn next_own(
    receiver: &Receiver,
    conn: &mut Connection,
    run: u32,
    checks: &mut Checks,
    what: &(dyn Fn() -> String + Sync),
) -> Result<(Delivery, Stamp, Instant)> {
    loop {
        let delivery = receiver.recv(conn).await.with_context(what)?;
        let at = Instant::now();
        let body = delivery.body().with_context(what)?;
        match payload::decode(&body) {
            Some(stamp) if stamp.run == run => return Ok((delivery, stamp, at)),
            _ => {
                checks.stale += 1;
                receiver.accept(conn, &delivery);
            }
        }
    }
}

/// An application-properties section: `colour = 'red'`.
fn colour_section() -> bytes::Bytes {
    use broker::codec::{Descriptor, Value};
    let mut out = bytes::BytesMut::new();
    Value::Described(Box::new((
        Descriptor::Code(0x74),
        Value::Map(vec![(
            Value::String("colour".into()),
            Value::String("red".into()),
        )]),
    )))
    .encode(&mut out);
    out.freeze()
}

fn body(args: &Args, run: u32, seq: u64) -> Vec<u8> {
    payload::encode(
        Stamp {
            run,
            publisher: 0,
            seq,
            sent_ns: 0,
        },
        args.payload,
    )
}

pub(crate) async fn run_trial(args: &Args, target: &Target, trial: u32) -> Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let url = target.url();
    let run = payload::new_run_id();
    let mut publisher =
        Connection::connect(&url, &format!("ramqp-bench-lat-pub-{run:08x}"), timeout)
            .await
            .context("publisher connection")?;
    let mut consumer =
        Connection::connect(&url, &format!("ramqp-bench-lat-con-{run:08x}"), timeout)
            .await
            .context("consumer connection")?;
    let filter = args
        .selector
        .as_deref()
        .map(|s| vec![broker::queue::filter::selector_entry("jms-selector", s)]);
    let receiver = consumer
        .attach_filtered_receiver(
            &format!("lat-receiver-{run:08x}"),
            &args.address,
            args.credit,
            filter,
        )
        .await?;
    let mut purged = 0u64;
    if matches!(target, Target::Url { .. }) {
        purged = receiver
            .purge(&mut consumer, Duration::from_millis(500))
            .await?;
    }
    if purged > 0 {
        eprintln!(
            "latency: trial {trial}: purged {purged} message(s) left in {}",
            args.address
        );
    }
    let mut sender = publisher
        .attach_sender(
            &format!("lat-sender-{run:08x}"),
            &args.address,
            !args.confirm,
        )
        .await?;
    if args.colour || args.selector.is_some() {
        sender = sender.with_sections(colour_section());
    }
    let mut checks = Checks::default();

    // Closed loop, one in flight.
    let mut samples = report::ClosedLoop::new(args.warmup, args.confirm);
    let rounds = args.warmup + args.lat_n;
    for seq in 0..rounds {
        let message = body(args, run, seq);
        super::gap(args, seq).await;
        let start = Instant::now();
        sender
            .send(&mut publisher, &message)
            .await
            .with_context(|| format!("publish message #{seq}"))?;
        if args.confirm {
            sender
                .wait_settled(&mut publisher, 0)
                .await
                .with_context(|| format!("publish message #{seq}"))?;
        } else {
            publisher.flush().await?;
        }
        let sent_at = Instant::now();
        let (delivery, stamp, at) = next_own(&receiver, &mut consumer, run, &mut checks, &|| {
            format!("closed loop: waiting for message #{seq}")
        })
        .await?;
        receiver.accept(&mut consumer, &delivery);
        consumer.flush().await?;
        samples.record(seq, stamp.seq, start, sent_at, at)?;
    }
    let (latency, confirm) = samples.percentiles();
    print_loop(args, trial, &latency, confirm.as_ref());

    let blast = if args.n > 0 {
        let mut ends = Ends {
            sender: &sender,
            publisher: &mut publisher,
            receiver: &receiver,
            consumer: &mut consumer,
        };
        Some(blast(args, &mut ends, run, rounds, &mut checks).await?)
    } else {
        None
    };
    let rss_kib = target.rss_kib();
    print_blast(args, trial, blast.as_ref(), rss_kib);

    // Close in order; a close that fails or hangs is reported, not fatal.
    let mut close_errors = Vec::new();
    for result in [
        sender.detach(&mut publisher).await,
        receiver.detach(&mut consumer).await,
        publisher.close().await,
        consumer.close().await,
    ] {
        if let Err(error) = result {
            eprintln!("latency: trial {trial}: WARNING close: {error:#}");
            close_errors.push(format!("{error:#}"));
        }
    }
    Ok(trial_json(
        args,
        trial,
        latency,
        confirm,
        blast,
        rss_kib,
        purged,
        checks.stale,
        close_errors,
    ))
}

/// Both ends of the blast.
struct Ends<'a> {
    sender: &'a Sender,
    publisher: &'a mut Connection,
    receiver: &'a Receiver,
    consumer: &'a mut Connection,
}

async fn blast(
    args: &Args,
    ends: &mut Ends<'_>,
    run: u32,
    first_seq: u64,
    checks: &mut Checks,
) -> Result<Blast> {
    let n = args.n;
    let (sender, receiver) = (ends.sender, ends.receiver);
    // Withdraw the consumer's credit so the broker holds the whole blast.
    receiver
        .set_credit(ends.consumer, 0)
        .await
        .context("set consumer credit to 0")?;

    let accepted_before = sender.accepted(ends.publisher)?;
    let started = Instant::now();
    let window = args.window.max(1);
    for i in 0..n {
        let seq = first_seq + i;
        let message = body(args, run, seq);
        sender
            .send(ends.publisher, &message)
            .await
            .with_context(|| format!("blast: publish message #{seq}"))?;
        if args.confirm && sender.unsettled(ends.publisher)? >= window {
            sender
                .wait_settled(ends.publisher, window - 1)
                .await
                .with_context(|| format!("blast: confirms around message #{seq}"))?;
        }
    }
    if args.confirm {
        sender
            .wait_settled(ends.publisher, 0)
            .await
            .context("blast: the last confirms")?;
    } else {
        ends.publisher.flush().await?;
    }
    let publish_secs = started.elapsed().as_secs_f64();
    if args.confirm {
        let accepted = sender.accepted(ends.publisher)? - accepted_before;
        if accepted != n {
            bail!("blast: {accepted} of {n} publishes accepted after the last confirm");
        }
    }

    let drain_started = Instant::now();
    receiver
        .set_credit(ends.consumer, args.credit)
        .await
        .context("grant consumer credit")?;
    let mut seen = SeqSet::default();
    let mut expected = first_seq;
    let mut out_of_order = 0u64;
    let mut order_samples = Vec::new();
    for k in 0..n {
        let (delivery, stamp, _) = next_own(receiver, ends.consumer, run, checks, &|| {
            format!(
                "blast drain: waiting for message {} of {n} ({k} received)",
                k + 1
            )
        })
        .await?;
        if stamp.seq < first_seq || !seen.insert(stamp.seq - first_seq) {
            bail!(
                "blast drain: message #{} delivered twice (or from the closed loop)",
                stamp.seq
            );
        }
        if stamp.seq != expected {
            out_of_order += 1;
            if order_samples.len() < 5 {
                order_samples.push((expected - first_seq, stamp.seq - first_seq));
            }
        }
        expected = stamp.seq + 1;
        receiver.accept(ends.consumer, &delivery);
    }
    ends.consumer.flush().await?;
    let drain_secs = drain_started.elapsed().as_secs_f64();
    let missing = seen.missing_below(n);
    if missing > 0 {
        bail!("blast drain: {missing} of {n} messages never arrived");
    }
    // Anything more is a duplicate the broker should not have sent.
    if let Some(extra) = receiver
        .recv_within(ends.consumer, Duration::from_millis(200))
        .await?
    {
        let stamp = extra.body().ok().and_then(|b| payload::decode(&b));
        bail!("after the drain: unexpected extra delivery {stamp:?} (duplicate)");
    }
    Ok(Blast {
        publish_secs,
        drain_secs,
        publish_msg_s: n as f64 / publish_secs,
        drain_msg_s: n as f64 / drain_secs,
        total_msg_s: n as f64 / (publish_secs + drain_secs),
        out_of_order,
        order_samples,
    })
}
