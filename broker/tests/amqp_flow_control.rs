//! Guards link flow control in both directions: a consumer never gets more
//! deliveries than the credit it granted; `drain` hands over what is queued
//! and then completes, consuming the rest of the credit (checked on the wire
//! with raw frames and through fe2o3); a drain on an empty queue completes
//! at once; and a full queue (`queues.max_messages`) stops granting its
//! publishers credit, holding their sends back until consumers take
//! messages, without losing any.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ramqpd_broker::codec::{Flow, Performative};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_gets_at_most_its_credit() {
    let broker = start().await;
    let mut connection = connect(&broker, "credit").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "credit").await;
    for i in 0..10 {
        send_text(&mut tx, &format!("c{i}")).await;
    }

    let mut rx = attach_receiver(&mut session, "rx", "credit", 3).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let (delivery, text) = recv_text(&mut rx).await;
        step("accept", rx.accept(&delivery)).await.unwrap();
        got.push(text);
    }
    expect_nothing(&mut rx, Duration::from_millis(300), "credit 3 is used up").await;
    assert_eq!(depth(&broker, "credit").map(|d| d.0), Some(7));

    step("credit 4", rx.set_credit(4)).await.unwrap();
    for _ in 0..4 {
        let (delivery, text) = recv_text(&mut rx).await;
        step("accept", rx.accept(&delivery)).await.unwrap();
        got.push(text);
    }
    expect_nothing(&mut rx, Duration::from_millis(300), "credit 4 is used up").await;
    assert_eq!(depth(&broker, "credit").map(|d| d.0), Some(3));

    step("credit 10", rx.set_credit(10)).await.unwrap();
    for _ in 0..3 {
        let (delivery, text) = recv_text(&mut rx).await;
        step("accept", rx.accept(&delivery)).await.unwrap();
        got.push(text);
    }
    assert_eq!(got, (0..10).map(|i| format!("c{i}")).collect::<Vec<_>>());
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// Read performatives until a flow for `handle`; transfers before it are
/// counted.
async fn transfers_then_flow(raw: &mut Raw, handle: u32) -> (usize, Flow) {
    let mut transfers = 0;
    loop {
        match raw.performative().await {
            (_, Performative::Transfer(t), _) => {
                assert_eq!(t.handle, handle);
                assert!(!t.more);
                transfers += 1;
            }
            (_, Performative::Flow(f), _) if f.handle == Some(handle) => return (transfers, f),
            (_, Performative::Flow(_), _) => continue,
            other => panic!("expected transfers then a flow, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_on_the_wire() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "drain").await;
    for i in 0..3 {
        raw.publish(0, 0, i, &text_message(&format!("d{i}"))).await;
    }
    raw.attach_consumer(0, 1, "drain").await;

    // credit 10 with drain: the 3 queued messages, then the answer that
    // uses up the remaining 7.
    let started = tokio::time::Instant::now();
    raw.send(0, Performative::Flow(credit_flow(1, 0, 10, true)))
        .await;
    let (transfers, flow) = transfers_then_flow(&mut raw, 1).await;
    assert_eq!(
        transfers, 3,
        "all queued messages come before the drain answer"
    );
    assert_eq!(flow.link_credit, Some(0), "{flow:?}");
    assert_eq!(
        flow.delivery_count,
        Some(10),
        "delivery-count advanced by the credit"
    );
    assert!(flow.drain, "the answer echoes drain");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "drain completes promptly"
    );

    // The drained credit is gone: a new message waits in the queue.
    raw.attach_publisher(0, 2, "drain").await;
    raw.publish(0, 2, 3, &text_message("late")).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), raw.performative()).await;
    assert!(
        quiet.is_err(),
        "delivered without credit after drain: {quiet:?}"
    );
    assert_eq!(depth(&broker, "drain").map(|d| d.0), Some(1));

    // Drain again on what is now a queue with 1 message and 0 credit,
    // granting 1: it arrives, and the answer leaves no credit.
    raw.send(0, Performative::Flow(credit_flow(1, 10, 1, true)))
        .await;
    let (transfers, flow) = transfers_then_flow(&mut raw, 1).await;
    assert_eq!(transfers, 1);
    assert_eq!(flow.link_credit, Some(0));
    assert_eq!(flow.delivery_count, Some(11));
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_on_an_empty_queue_completes_at_once() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_consumer(0, 0, "empty").await;
    let started = tokio::time::Instant::now();
    raw.send(0, Performative::Flow(credit_flow(0, 0, 5, true)))
        .await;
    let (transfers, flow) = within(
        Duration::from_secs(1),
        "drain answer on an empty queue",
        transfers_then_flow(&mut raw, 0),
    )
    .await;
    assert_eq!(transfers, 0);
    assert_eq!(flow.link_credit, Some(0));
    assert_eq!(flow.delivery_count, Some(5));
    assert!(started.elapsed() < Duration::from_secs(1));

    // The credit is really gone: a message published now stays queued.
    raw.attach_publisher(0, 1, "empty").await;
    raw.publish(0, 1, 0, &text_message("after the drain")).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), raw.performative()).await;
    assert!(
        quiet.is_err(),
        "delivered without credit after drain: {quiet:?}"
    );
    assert_eq!(depth(&broker, "empty"), Some((1, 0, 1)));
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_drain_takes_what_is_queued_and_ends_the_credit() {
    let broker = start().await;
    let mut connection = connect(&broker, "drain-fe").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "drain-fe").await;
    for i in 0..3 {
        send_text(&mut tx, &format!("q{i}")).await;
    }
    let mut rx = attach_receiver(&mut session, "rx", "drain-fe", 0).await;
    step("credit 10", rx.set_credit(10)).await.unwrap();
    step("drain", rx.drain()).await.unwrap();
    for i in 0..3 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("q{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    // A round trip on the same session: the broker has handled the drain.
    let mut tx2 = attach_sender(&mut session, "tx2", "drain-fe").await;
    send_text(&mut tx2, "after drain").await;
    expect_nothing(
        &mut rx,
        Duration::from_millis(300),
        "drain used up the credit",
    )
    .await;
    assert_eq!(depth(&broker, "drain-fe").map(|d| d.0), Some(1));
    step("credit 1", rx.set_credit(1)).await.unwrap();
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "after drain");
    step("accept", rx.accept(&delivery)).await.unwrap();

    // Credit on the now empty queue, drained: nothing is owed afterwards.
    step("credit 5", rx.set_credit(5)).await.unwrap();
    step("drain empty", rx.drain()).await.unwrap();
    // Round trip on the session so the drain has been handled.
    let tx3 = attach_sender(&mut session, "tx3", "drain-fe").await;
    step("close tx3", tx3.close()).await.unwrap();
    send_text(&mut tx2, "after empty drain").await;
    expect_nothing(
        &mut rx,
        Duration::from_millis(300),
        "empty drain used up the credit",
    )
    .await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_holds_publishers_back_without_loss() {
    const LIMIT: usize = 5;
    const TOTAL: usize = 12;
    let broker = start_with(|c| {
        c.queues.max_messages = LIMIT;
        // One credit at a time, so the limit is exact.
        c.limits.link_credit = 1;
    })
    .await;
    let mut producer_connection = connect(&broker, "producer").await;
    let mut producer_session = begin_session(&mut producer_connection).await;
    let mut tx = attach_sender(&mut producer_session, "tx", "bounded").await;
    let completed = Arc::new(AtomicUsize::new(0));
    let progress = completed.clone();
    let producer = tokio::spawn(async move {
        for i in 0..TOTAL {
            let outcome = tx.send(format!("b{i:02}")).await.expect("send");
            assert!(outcome.is_accepted(), "{outcome:?}");
            progress.fetch_add(1, Ordering::SeqCst);
        }
        tx
    });

    eventually(Duration::from_secs(5), "the queue fills up", || {
        completed.load(Ordering::SeqCst) >= LIMIT
    })
    .await;
    holds_for(
        Duration::from_millis(500),
        "sends beyond queues.max_messages must wait",
        || completed.load(Ordering::SeqCst) == LIMIT,
    )
    .await;
    assert_eq!(depth(&broker, "bounded").map(|d| d.0), Some(LIMIT));

    // A consumer takes one: exactly one more send goes through.
    let mut consumer_connection = connect(&broker, "consumer").await;
    let mut consumer_session = begin_session(&mut consumer_connection).await;
    let mut rx = attach_receiver(&mut consumer_session, "rx", "bounded", 1).await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "b00");
    step("accept", rx.accept(&delivery)).await.unwrap();
    eventually(Duration::from_secs(5), "one more send completes", || {
        completed.load(Ordering::SeqCst) == LIMIT + 1
    })
    .await;
    holds_for(
        Duration::from_millis(300),
        "one message taken lets exactly one more send through",
        || completed.load(Ordering::SeqCst) == LIMIT + 1,
    )
    .await;

    // Consume the rest: every message exactly once, in order.
    let mut got = vec![text];
    while got.len() < TOTAL {
        step("credit", rx.set_credit(1)).await.unwrap();
        let (delivery, text) = recv_text(&mut rx).await;
        step("accept", rx.accept(&delivery)).await.unwrap();
        got.push(text);
    }
    let tx = step("producer finishes", producer).await.unwrap();
    assert_eq!(completed.load(Ordering::SeqCst), TOTAL);
    assert_eq!(
        got,
        (0..TOTAL).map(|i| format!("b{i:02}")).collect::<Vec<_>>()
    );
    step("credit", rx.set_credit(5)).await.unwrap();
    expect_nothing(&mut rx, Duration::from_millis(200), "no duplicates").await;

    step("close tx", tx.close()).await.unwrap();
    step("close producer", producer_connection.close())
        .await
        .unwrap();
    step("close consumer", consumer_connection.close())
        .await
        .unwrap();
    stop(broker).await;
}

/// A consumer that takes its credit away while deliveries are on their
/// way to it, then gives some back, still gets the queue's order and never
/// more than its credit. Deliveries the link has no credit for when they
/// reach the engine are held there and go out first when credit returns.
/// (The engine used to hand them back to the queue one by one while later
/// ones, arriving after new credit, went out: a Proton consumer saw runs
/// out of order in tests/interop/test_crash_points.py. That interleaving
/// needs a flow to land between two queued deliveries, which this test
/// invites with varied timing but cannot force.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_taken_away_midway_keeps_the_queue_order() {
    const N: usize = 800;
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "recredit").await;
    for i in 0..N as u32 {
        raw.publish(0, 0, i, &text_message(&format!("r{i}"))).await;
    }
    raw.attach_consumer(0, 1, "recredit").await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut tags: Vec<u64> = Vec::new();
    let mut round = 0u32;
    while tags.len() < N {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {N} arrived",
            tags.len()
        );
        round += 1;
        let count = tags.len() as u32;
        // Grant, take away, grant less: the broker may be anywhere in
        // sending the first grant when the others arrive.
        raw.send(0, Performative::Flow(credit_flow(1, count, 60, false)))
            .await;
        if round.is_multiple_of(3) {
            tokio::task::yield_now().await;
        }
        raw.send(0, Performative::Flow(credit_flow(1, count, 0, false)))
            .await;
        if round.is_multiple_of(2) {
            for _ in 0..20 {
                tokio::task::yield_now().await;
            }
        }
        let last_grant = 1 + round % 40;
        raw.send(
            0,
            Performative::Flow(credit_flow(1, count, last_grant, false)),
        )
        .await;
        // Read until the line is quiet; whatever came is bounded by what
        // was granted last on top of what had been received.
        loop {
            match tokio::time::timeout(Duration::from_millis(50), raw.performative()).await {
                Ok((_, Performative::Transfer(t), _)) => {
                    let tag: [u8; 8] = t
                        .delivery_tag
                        .as_deref()
                        .and_then(|t| t.try_into().ok())
                        .expect("an 8-byte delivery tag");
                    tags.push(u64::from_be_bytes(tag));
                }
                Ok((_, Performative::Flow(_), _)) => continue,
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) => break,
            }
        }
        assert!(
            tags.len() as u32 <= count + 60,
            "round {round}: more transfers than any credit granted"
        );
    }
    let out_of_order: Vec<(usize, u64, u64)> = tags
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] <= w[0])
        .map(|(i, w)| (i + 1, w[0], w[1]))
        .take(5)
        .collect();
    assert!(
        out_of_order.is_empty(),
        "out of order (place, before, after): {out_of_order:?}"
    );
    assert_eq!(tags.len(), N);
    drop(raw);
    stop(broker).await;
}
