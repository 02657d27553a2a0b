//! Guards what happens to a delivery after the consumer's outcome, and to
//! unsettled deliveries whose consumer goes away: `released` redelivers it
//! with its delivery-count unchanged; `modified` with delivery-failed
//! redelivers it with delivery-count + 1 in the header; `modified` with
//! undeliverable-here sends it to another consumer only; `rejected` removes
//! it; competing consumers share a queue (each message exactly once); and
//! messages left unsettled by a detached or dropped link, an ended session,
//! a closed connection or a vanished socket are redelivered, in order, with
//! their delivery-count unchanged.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::{Header, Message, Modified, Properties};
use fe2o3_amqp::Receiver;
use ramqpd_broker::codec::Performative;

fn modified(delivery_failed: bool, undeliverable_here: bool) -> Modified {
    Modified {
        delivery_failed: Some(delivery_failed),
        undeliverable_here: Some(undeliverable_here),
        message_annotations: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_and_modified_delivery_counts() {
    let broker = start().await;
    let mut connection = connect(&broker, "counts").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "counts").await;
    send_text(&mut tx, "first").await;
    send_text(&mut tx, "second").await;
    let mut rx = attach_receiver(&mut session, "rx", "counts", 1).await;

    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("first"));
    assert_eq!(header_delivery_count(d.message()), 0);

    // released: back at the head of the queue, count unchanged.
    step("release", rx.release(&d)).await.unwrap();
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(
        body_text(d.message()).as_deref(),
        Some("first"),
        "released goes first"
    );
    assert_eq!(
        header_delivery_count(d.message()),
        0,
        "released keeps the count"
    );

    // modified{delivery-failed}: count + 1, in the header of the redelivery.
    step("modify", rx.modify(&d, modified(true, false)))
        .await
        .unwrap();
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("first"));
    let header = d
        .message()
        .header
        .clone()
        .expect("redelivery carries a header");
    assert_eq!(
        header.delivery_count, 1,
        "delivery-failed counts an attempt"
    );
    assert!(
        !header.first_acquirer,
        "a redelivery is not a first acquisition"
    );

    // released again: the count stays at 1.
    step("release", rx.release(&d)).await.unwrap();
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(
        header_delivery_count(d.message()),
        1,
        "released keeps the count"
    );

    // modified without delivery-failed: unchanged too.
    step("modify", rx.modify(&d, modified(false, false)))
        .await
        .unwrap();
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(header_delivery_count(d.message()), 1);

    // Twice more failed: 2, then 3.
    let mut d = d;
    for expected in [2, 3] {
        step("modify", rx.modify(&d, modified(true, false)))
            .await
            .unwrap();
        step("credit", rx.set_credit(1)).await.unwrap();
        d = recv(&mut rx).await;
        assert_eq!(header_delivery_count(d.message()), expected);
    }
    step("accept", rx.accept(&d)).await.unwrap();

    // Then the second message, never touched: count 0.
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("second"));
    assert_eq!(header_delivery_count(d.message()), 0);
    step("accept", rx.accept(&d)).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_failed_counts_on_top_of_the_published_header() {
    let broker = start().await;
    let mut connection = connect(&broker, "published-count").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "pc").await;
    let sent = Message::builder()
        .header(
            Header::builder()
                .durable(true)
                .priority(6)
                .delivery_count(5)
                .build(),
        )
        .properties(
            Properties::builder()
                .message_id("keep-me".to_string())
                .subject("s")
                .build(),
        )
        .value("payload".to_string())
        .build();
    let outcome = step("send", tx.send(sent.clone())).await.unwrap();
    assert!(outcome.is_accepted());
    let mut rx = attach_receiver(&mut session, "rx", "pc", 1).await;
    let d = recv(&mut rx).await;
    assert_eq!(
        header_delivery_count(d.message()),
        5,
        "published count is kept"
    );
    step("modify", rx.modify(&d, modified(true, false)))
        .await
        .unwrap();
    step("credit", rx.set_credit(1)).await.unwrap();
    let d = recv(&mut rx).await;
    let header = d.message().header.clone().expect("header");
    assert_eq!(header.delivery_count, 6);
    assert!(header.durable, "other header fields are kept");
    assert_eq!(header.priority.0, 6);
    assert_eq!(
        d.message().properties,
        sent.properties,
        "the rest is untouched"
    );
    assert_eq!(body_text(d.message()).as_deref(), Some("payload"));
    step("accept", rx.accept(&d)).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeliverable_here_goes_to_the_other_consumer() {
    let broker = start().await;
    let mut c1 = connect(&broker, "uh-1").await;
    let mut s1 = begin_session(&mut c1).await;
    let mut c2 = connect(&broker, "uh-2").await;
    let mut s2 = begin_session(&mut c2).await;
    let mut first = attach_receiver(&mut s1, "first", "uh", 1).await;
    let mut second = attach_receiver(&mut s2, "second", "uh", 0).await;
    let mut tx = attach_sender(&mut s1, "tx", "uh").await;
    send_text(&mut tx, "not for me").await;

    let d = recv(&mut first).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("not for me"));
    step("modify", first.modify(&d, modified(false, true)))
        .await
        .unwrap();
    // The first consumer has credit again but must not get it back.
    step("credit", first.set_credit(5)).await.unwrap();
    expect_nothing(&mut first, Duration::from_millis(300), "undeliverable-here").await;
    assert_eq!(depth(&broker, "uh").map(|d| d.0), Some(1), "still queued");

    step("credit", second.set_credit(1)).await.unwrap();
    let d = recv(&mut second).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("not for me"));
    assert_eq!(
        header_delivery_count(d.message()),
        0,
        "no failed attempt counted"
    );
    step("accept", second.accept(&d)).await.unwrap();

    // Other messages still reach the first consumer.
    send_text(&mut tx, "for anyone").await;
    let d = recv(&mut first).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("for anyone"));
    step("accept", first.accept(&d)).await.unwrap();
    step("close c1", c1.close()).await.unwrap();
    step("close c2", c2.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_is_removed() {
    let broker = start().await;
    let mut connection = connect(&broker, "reject").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "reject").await;
    send_text(&mut tx, "bad").await;
    send_text(&mut tx, "good").await;
    let mut rx = attach_receiver(&mut session, "rx", "reject", 1).await;
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("bad"));
    step("reject", rx.reject(&d, None)).await.unwrap();
    eventually(Duration::from_secs(5), "one message left", || {
        depth(&broker, "reject") == Some((1, 0, 1))
    })
    .await;
    step("credit", rx.set_credit(5)).await.unwrap();
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("good"));
    step("accept", rx.accept(&d)).await.unwrap();
    expect_nothing(&mut rx, Duration::from_millis(300), "rejected is gone").await;
    eventually(Duration::from_secs(5), "queue empty", || {
        depth(&broker, "reject") == Some((0, 0, 1))
    })
    .await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn competing_consumers_share_the_queue() {
    const N: usize = 200;
    let broker = start().await;
    let mut consumers = Vec::new();
    for c in 0..2 {
        let mut connection = connect(&broker, &format!("compete-{c}")).await;
        let mut session = begin_session(&mut connection).await;
        let rx = step(
            "auto-credit receiver",
            Receiver::builder()
                .name(format!("rx-{c}"))
                .source("/queues/compete")
                .credit_mode(CreditMode::Auto(10))
                .attach(&mut session),
        )
        .await
        .unwrap();
        consumers.push((connection, session, rx));
    }
    // Both consumers are subscribed before anything is published.
    eventually(Duration::from_secs(5), "two consumers", || {
        depth(&broker, "compete").map(|d| d.2) == Some(2)
    })
    .await;

    let mut tasks = Vec::new();
    for (connection, session, mut rx) in consumers {
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while got.len() < N {
                match tokio::time::timeout(Duration::from_millis(500), rx.recv::<String>()).await {
                    Ok(delivery) => {
                        let delivery = delivery.expect("recv");
                        got.push(delivery.body().clone());
                        rx.accept(&delivery).await.expect("accept");
                    }
                    Err(_) => break, // quiet: the other consumer has the rest
                }
            }
            (connection, session, rx, got)
        }));
    }
    let mut connection = connect(&broker, "compete-tx").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "compete").await;
    for i in 0..N {
        send_text(&mut tx, &format!("{i:03}")).await;
    }

    let mut all = Vec::new();
    let mut counts = Vec::new();
    for task in tasks {
        let (mut connection, _session, _rx, got) =
            within(Duration::from_secs(20), "consumer task", task)
                .await
                .unwrap();
        // Each consumer sees its share in queue order.
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(got, sorted, "a consumer's messages arrive in order");
        counts.push(got.len());
        all.extend(got);
        step("close consumer", connection.close()).await.unwrap();
    }
    assert!(
        counts.iter().all(|c| *c > 0),
        "both consumers get messages: {counts:?}"
    );
    assert_eq!(all.len(), N, "no duplicates, nothing lost: {counts:?}");
    let unique: BTreeSet<_> = all.into_iter().collect();
    assert_eq!(
        unique,
        (0..N).map(|i| format!("{i:03}")).collect::<BTreeSet<_>>()
    );
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// Publish `n` numbered messages to `queue` on a fresh connection.
async fn publish(broker: &ramqpd_broker::Broker, queue: &str, n: usize) {
    let mut connection = connect(broker, &format!("pub-{queue}")).await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", queue).await;
    for i in 0..n {
        send_text(&mut tx, &format!("{i}")).await;
    }
    step("close", connection.close()).await.unwrap();
}

/// Receive `n` messages without settling them; check they are 0..n.
async fn take_unsettled(rx: &mut Receiver, n: usize) {
    for i in 0..n {
        let (_, text) = recv_text(rx).await;
        assert_eq!(text, format!("{i}"));
    }
}

/// A new consumer gets all `n` messages, in order, with delivery-count 0.
async fn expect_all_redelivered(broker: &ramqpd_broker::Broker, queue: &str, n: usize) {
    eventually(
        Duration::from_secs(5),
        "nothing left out with a consumer",
        || depth(broker, queue).map(|d| (d.0, d.1)) == Some((n, 0)),
    )
    .await;
    let mut connection = connect(broker, &format!("again-{queue}")).await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "again", queue, n as u32 + 5).await;
    for i in 0..n {
        let d = recv(&mut rx).await;
        assert_eq!(
            body_text(d.message()),
            Some(format!("{i}")),
            "redelivery order"
        );
        assert_eq!(
            header_delivery_count(d.message()),
            0,
            "count unchanged by requeue"
        );
        step("accept", rx.accept(&d)).await.unwrap();
    }
    expect_nothing(&mut rx, Duration::from_millis(200), "each exactly once").await;
    step("close", connection.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_link_returns_unsettled_in_order() {
    let broker = start().await;
    publish(&broker, "detach", 8).await;
    let mut connection = connect(&broker, "detacher").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx", "detach", 5).await;
    take_unsettled(&mut rx, 5).await;
    step("close link", rx.close()).await.unwrap();
    // The connection stays open: only the link went away.
    expect_all_redelivered(&broker, "detach", 8).await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_receiver_returns_unsettled_in_order() {
    let broker = start().await;
    publish(&broker, "dropped", 6).await;
    let mut connection = connect(&broker, "dropper").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx", "dropped", 4).await;
    take_unsettled(&mut rx, 4).await;
    drop(rx);
    expect_all_redelivered(&broker, "dropped", 6).await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_session_returns_unsettled_in_order() {
    let broker = start().await;
    publish(&broker, "ended", 5).await;
    let mut connection = connect(&broker, "ender").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx", "ended", 3).await;
    take_unsettled(&mut rx, 3).await;
    step("end session", session.end()).await.unwrap();
    expect_all_redelivered(&broker, "ended", 5).await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_connection_returns_unsettled_in_order() {
    let broker = start().await;
    publish(&broker, "closed", 5).await;
    let mut connection = connect(&broker, "closer").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx", "closed", 5).await;
    take_unsettled(&mut rx, 5).await;
    step("close connection", connection.close()).await.unwrap();
    expect_all_redelivered(&broker, "closed", 5).await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanished_socket_returns_unsettled_in_order() {
    let broker = start().await;
    publish(&broker, "vanished", 4).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_consumer(0, 0, "vanished").await;
    raw.send(0, Performative::Flow(credit_flow(0, 0, 3, false)))
        .await;
    for _ in 0..3 {
        let delivery = raw.delivery().await;
        assert_eq!(delivery.first.settled, Some(false), "unsettled delivery");
    }
    assert_eq!(depth(&broker, "vanished"), Some((1, 3, 1)));
    // No detach, no end, no close: the socket just goes away.
    drop(raw);
    expect_all_redelivered(&broker, "vanished", 4).await;
    stop(broker).await;
}
