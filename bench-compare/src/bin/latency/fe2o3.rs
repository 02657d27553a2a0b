//! The `latency` trial with `--client fe2o3` (the default): the closed
//! loop and the blast on fe2o3-amqp, through the fast path in `src/amqp.rs`.
//! The result and its stderr lines are built in `main.rs`, shared with the
//! raw client's trial (`raw.rs`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use fe2o3_amqp::link::delivery::Delivery;
use fe2o3_amqp::types::messaging::Data;
use fe2o3_amqp::{Receiver, Sender};
use serde_json::Value;

use ramqp_bench_compare::amqp::{self, within};
use ramqp_bench_compare::payload::{self, SeqSet, Stamp};
use ramqp_bench_compare::report;
use ramqp_bench_compare::target::Target;

use super::{print_blast, print_loop, trial_json, Args, Blast, Checks};

/// Take the next delivery of this run, accepting and counting stale ones.
async fn next_own(
    receiver: &mut Receiver,
    run: u32,
    timeout: Duration,
    checks: &mut Checks,
    what: &(dyn Fn() -> String + Sync),
) -> Result<(Delivery<Data>, Stamp, Instant)> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let delivery: Delivery<Data> = match tokio::time::timeout_at(deadline, receiver.recv::<Data>()).await {
            Ok(Ok(delivery)) => delivery,
            Ok(Err(error)) => bail!("{}: receive failed: {error:?}", what()),
            Err(_) => bail!(
                "{}: no delivery within {timeout:?} (the broker lost or withheld a published message)",
                what()
            ),
        };
        let at = Instant::now();
        match payload::decode(&delivery.body().0) {
            Some(stamp) if stamp.run == run => return Ok((delivery, stamp, at)),
            _ => {
                checks.stale += 1;
                within(
                    timeout,
                    "accept a stale message",
                    receiver.accept(&delivery),
                )
                .await?;
            }
        }
    }
}

async fn accept(receiver: &Receiver, delivery: &Delivery<Data>, timeout: Duration) -> Result<()> {
    within(timeout, "accept", receiver.accept(delivery)).await
}

/// Take whatever is in the queue already (external brokers only).
async fn purge(receiver: &mut Receiver, timeout: Duration) -> Result<u64> {
    let mut purged = 0u64;
    let idle = Duration::from_millis(500);
    while let Ok(received) = tokio::time::timeout(idle, receiver.recv::<Data>()).await {
        let delivery = received.map_err(|e| anyhow!("purge: receive failed: {e:?}"))?;
        accept(receiver, &delivery, timeout).await?;
        purged += 1;
    }
    Ok(purged)
}

pub(crate) async fn run_trial(args: &Args, target: &Target, trial: u32) -> Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let url = target.url();
    let run = payload::new_run_id();
    let mut publisher = amqp::connect(&url, &format!("ramqp-bench-lat-pub-{run:08x}"), timeout)
        .await
        .context("publisher connection")?;
    let mut consumer = amqp::connect(&url, &format!("ramqp-bench-lat-con-{run:08x}"), timeout)
        .await
        .context("consumer connection")?;
    let mut receiver = consumer
        .receiver(
            &format!("lat-receiver-{run:08x}"),
            &args.address,
            args.credit,
        )
        .await?;
    let purged = if matches!(target, Target::Url { .. }) {
        purge(&mut receiver, timeout).await?
    } else {
        0
    };
    if purged > 0 {
        eprintln!(
            "latency: trial {trial}: purged {purged} message(s) left in {}",
            args.address
        );
    }
    let mut sender = publisher
        .sender(
            &format!("lat-sender-{run:08x}"),
            &args.address,
            !args.confirm,
        )
        .await?;

    let body = |seq: u64| {
        amqp::message(payload::encode(
            Stamp {
                run,
                publisher: 0,
                seq,
                sent_ns: 0,
            },
            args.payload,
        ))
    };
    let mut checks = Checks::default();

    // Closed loop, one in flight.
    let mut samples = report::ClosedLoop::new(args.warmup, args.confirm);
    let rounds = args.warmup + args.lat_n;
    for seq in 0..rounds {
        let message = body(seq);
        super::gap(args, seq).await;
        let start = Instant::now();
        publish_one(&mut sender, message, args.confirm, timeout, seq).await?;
        let sent_at = Instant::now();
        let (delivery, stamp, at) = next_own(&mut receiver, run, timeout, &mut checks, &|| {
            format!("closed loop: waiting for message #{seq}")
        })
        .await?;
        accept(&receiver, &delivery, timeout).await?;
        samples.record(seq, stamp.seq, start, sent_at, at)?;
    }
    let (latency, confirm) = samples.percentiles();
    print_loop(args, trial, &latency, confirm.as_ref());

    // Blast: publish all with no consumer credit, then drain.
    let blast = if args.n > 0 {
        Some(
            blast(
                args,
                &mut sender,
                &mut receiver,
                run,
                rounds,
                timeout,
                &mut checks,
            )
            .await?,
        )
    } else {
        None
    };
    let rss_kib = target.rss_kib();
    print_blast(args, trial, blast.as_ref(), rss_kib);

    // Close in order; a close that fails or hangs is reported, not fatal.
    let mut close_errors = Vec::new();
    for result in [
        amqp::close_sender(sender, timeout).await,
        amqp::close_receiver(receiver, timeout).await,
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

async fn publish_one(
    sender: &mut Sender,
    message: fe2o3_amqp::types::messaging::Message<Data>,
    confirm: bool,
    timeout: Duration,
    seq: u64,
) -> Result<()> {
    let outcome = within(
        timeout,
        &format!("publish message #{seq}"),
        sender.send(message),
    )
    .await?;
    if confirm {
        amqp::expect_accepted(outcome).with_context(|| format!("publish message #{seq}"))?;
    }
    Ok(())
}

async fn blast(
    args: &Args,
    sender: &mut Sender,
    receiver: &mut Receiver,
    run: u32,
    first_seq: u64,
    timeout: Duration,
    checks: &mut Checks,
) -> Result<Blast> {
    let n = args.n;
    // Withdraw the consumer's credit so the broker holds the whole blast:
    // the publish phase then measures publishing alone.
    within(timeout, "set consumer credit to 0", receiver.set_credit(0)).await?;

    let started = Instant::now();
    if args.confirm {
        let window = args.window.max(1);
        let mut in_flight = VecDeque::with_capacity(window);
        for i in 0..n {
            let seq = first_seq + i;
            if in_flight.len() >= window {
                confirm_front(&mut in_flight, timeout).await?;
            }
            let message = amqp::message(payload::encode(
                Stamp {
                    run,
                    publisher: 0,
                    seq,
                    sent_ns: 0,
                },
                args.payload,
            ));
            let fut = within(
                timeout,
                &format!("blast: publish message #{seq}"),
                sender.send_batchable(message),
            )
            .await?;
            in_flight.push_back((seq, fut));
        }
        while !in_flight.is_empty() {
            confirm_front(&mut in_flight, timeout).await?;
        }
    } else {
        for i in 0..n {
            let seq = first_seq + i;
            let message = amqp::message(payload::encode(
                Stamp {
                    run,
                    publisher: 0,
                    seq,
                    sent_ns: 0,
                },
                args.payload,
            ));
            within(
                timeout,
                &format!("blast: publish message #{seq}"),
                sender.send(message),
            )
            .await?;
        }
    }
    let publish_secs = started.elapsed().as_secs_f64();

    let drain_started = Instant::now();
    within(
        timeout,
        "grant consumer credit",
        receiver.set_credit(args.credit),
    )
    .await?;
    let mut seen = SeqSet::default();
    let mut expected = first_seq;
    let mut out_of_order = 0u64;
    // The first few (expected, delivered) blast indexes where order broke.
    let mut order_samples = Vec::new();
    for k in 0..n {
        let (delivery, stamp, _) = next_own(receiver, run, timeout, checks, &|| {
            format!(
                "blast drain: waiting for message {} of {n} ({} received)",
                k + 1,
                k
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
        accept(receiver, &delivery, timeout).await?;
    }
    let drain_secs = drain_started.elapsed().as_secs_f64();
    let missing = seen.missing_below(n);
    if missing > 0 {
        bail!("blast drain: {missing} of {n} messages never arrived");
    }
    // Anything more is a duplicate the broker should not have sent.
    if let Ok(extra) =
        tokio::time::timeout(Duration::from_millis(200), receiver.recv::<Data>()).await
    {
        let extra = extra.map_err(|e| anyhow!("after the drain: receive failed: {e:?}"))?;
        let stamp = payload::decode(&extra.body().0);
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

async fn confirm_front(
    in_flight: &mut VecDeque<(u64, amqp::Confirm)>,
    timeout: Duration,
) -> Result<()> {
    let Some((seq, fut)) = in_flight.pop_front() else {
        return Ok(());
    };
    amqp::confirmed(fut, timeout, &|| {
        format!("blast: confirm of message #{seq}")
    })
    .await
}
