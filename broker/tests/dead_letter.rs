//! Dead-lettering and the delivery limit, with fe2o3-amqp over real
//! sockets on one broker whose policies give the source queues a
//! dead-letter address and a delivery limit: a rejected message reaches
//! the dead-letter queue with RabbitMQ's annotations (x-opt-deaths,
//! x-first-death-queue/reason); a message modified as delivery-failed as
//! often as the limit, or abandoned by consumers that went away without
//! settling it, arrives with reason delivery_limit; without a dead-letter
//! address it is dropped. On a transient and on a quorum queue (the
//! quorum dead-letter path is the Raft outbox, `quorum/dead_letter_outbox.rs`),
//! from one kind into the other, and a quorum queue's expired and
//! dropped-head messages.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{Message, Modified};
use fe2o3_amqp::types::primitives::Value as FeValue;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::config::PolicyConfig;
use ramqpd_broker::Broker;

fn policy(pattern: &str, dlx: Option<&str>, delivery_limit: Option<u32>) -> PolicyConfig {
    PolicyConfig {
        pattern: pattern.into(),
        dead_letter_address: dlx.map(str::to_string),
        delivery_limit,
        ..PolicyConfig::default()
    }
}

async fn broker() -> Broker {
    start_with(|c| {
        c.policies = vec![
            policy("/queues/src-*", Some("/queues/dlq"), Some(2)),
            policy("/queues/drop-*", None, Some(1)),
            policy("/quorum/src-*", Some("/quorum/dlq"), Some(2)),
            policy("/quorum/drop-*", None, Some(1)),
            policy("/queues/t2q-*", Some("/quorum/dlq-cross"), None),
            policy("/quorum/q2t-*", Some("/queues/dlq-cross"), None),
            PolicyConfig {
                message_ttl_ms: Some(50),
                ..policy("/quorum/ttl-*", Some("/quorum/dlq-limits"), None)
            },
            PolicyConfig {
                max_length: Some(1),
                overflow: ramqpd_broker::config::Overflow::DropHead,
                ..policy("/quorum/len-*", Some("/quorum/dlq-limits"), None)
            },
        ];
        fast_raft(c);
    })
    .await
}

async fn sender(session: &mut Sess, address: &str) -> Sender {
    step(
        "sender attach",
        Sender::attach(session, format!("s-{address}"), address.to_string()),
    )
    .await
    .expect("sender attaches")
}

async fn receiver(session: &mut Sess, name: &str, address: &str) -> Receiver {
    let mut receiver = step(
        "receiver attach",
        Receiver::builder()
            .name(name.to_string())
            .source(address.to_string())
            .credit_mode(CreditMode::Manual)
            .attach(session),
    )
    .await
    .expect("receiver attaches");
    step("credit", receiver.set_credit(10))
        .await
        .expect("credit");
    receiver
}

fn failed() -> Modified {
    Modified {
        delivery_failed: Some(true),
        undeliverable_here: None,
        message_annotations: None,
    }
}

fn annotation<'a>(message: &'a Message<AnyBody>, key: &str) -> Option<&'a FeValue> {
    message
        .message_annotations
        .as_ref()?
        .iter()
        .find_map(|(k, v)| match k {
            OwnedKey::Symbol(s) if s.0 == key => Some(v),
            _ => None,
        })
}

fn text(value: Option<&FeValue>) -> Option<&str> {
    match value? {
        FeValue::Symbol(s) => Some(&s.0),
        FeValue::String(s) => Some(s),
        _ => None,
    }
}

/// The death records: (queue, reason, count) each, most recent first.
fn deaths(message: &Message<AnyBody>) -> Vec<(String, String, u64)> {
    let Some(FeValue::List(records)) = annotation(message, "x-opt-deaths") else {
        panic!("no x-opt-deaths list in {message:?}");
    };
    records
        .iter()
        .map(|record| {
            let FeValue::Map(map) = record else {
                panic!("a death record is not a map: {record:?}");
            };
            let get = |key: &str| {
                map.iter()
                    .find(|(k, _)| matches!(k, FeValue::Symbol(s) if s.0 == key))
                    .map(|(_, v)| v)
            };
            let count = match get("count") {
                Some(FeValue::Ulong(n)) => *n,
                other => panic!("count is {other:?}"),
            };
            (
                text(get("queue")).unwrap_or_default().to_string(),
                text(get("reason")).unwrap_or_default().to_string(),
                count,
            )
        })
        .collect()
}

/// Receive from the dead-letter queue the message with body `body` and
/// check its annotations name `queue` and `reason`.
async fn expect_dead_letter(dlq: &mut Receiver, body: &str, queue: &str, reason: &str) {
    let delivery = recv(dlq).await;
    let message = delivery.message();
    assert_eq!(body_text(message).as_deref(), Some(body));
    assert_eq!(deaths(message), vec![(queue.into(), reason.into(), 1)]);
    assert_eq!(
        text(annotation(message, "x-first-death-queue")),
        Some(queue)
    );
    assert_eq!(
        text(annotation(message, "x-first-death-reason")),
        Some(reason)
    );
    assert_eq!(
        text(annotation(message, "x-last-death-reason")),
        Some(reason)
    );
    assert_eq!(
        header_delivery_count(message),
        0,
        "counted again in the DLQ"
    );
    step("accept", dlq.accept(&delivery)).await.expect("accept");
}

/// Rejected, over the limit by modified(delivery-failed), over the limit
/// by consumers going away; and dropped without a dead-letter address.
async fn dead_letters_on(broker: &Broker, kind: &str) {
    let src = format!("/{kind}/src-a");
    let dlq_address = format!("/{kind}/dlq");
    let mut connection = connect(broker, &format!("dl-{kind}")).await;
    let mut session = begin_session(&mut connection).await;
    let mut dlq = receiver(&mut session, "dlq", &dlq_address).await;
    let mut tx = sender(&mut session, &src).await;

    // Rejected.
    send_text(&mut tx, "rejected").await;
    let mut rx = receiver(&mut session, "rx-1", &src).await;
    let d = recv(&mut rx).await;
    step("reject", rx.reject(&d, None)).await.expect("reject");
    expect_dead_letter(&mut dlq, "rejected", &src, "rejected").await;

    // modified(delivery-failed) twice: the limit is 2.
    send_text(&mut tx, "failed").await;
    let d = recv(&mut rx).await;
    step("modify", rx.modify(&d, failed()))
        .await
        .expect("modify");
    let d = recv(&mut rx).await;
    assert_eq!(header_delivery_count(d.message()), 1);
    step("modify", rx.modify(&d, failed()))
        .await
        .expect("modify");
    expect_dead_letter(&mut dlq, "failed", &src, "delivery_limit").await;

    // Consumers going away without settling count as failures too.
    send_text(&mut tx, "abandoned").await;
    let _unsettled = recv(&mut rx).await;
    step("detach", rx.close()).await.expect("detach");
    let mut rx = receiver(&mut session, "rx-2", &src).await;
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("abandoned"));
    assert_eq!(header_delivery_count(d.message()), 1, "the detach counted");
    step("detach", rx.close()).await.expect("detach");
    expect_dead_letter(&mut dlq, "abandoned", &src, "delivery_limit").await;

    // Without a dead-letter address: dropped at the limit (1).
    let drop_address = format!("/{kind}/drop-a");
    let mut tx = sender(&mut session, &drop_address).await;
    send_text(&mut tx, "dropped").await;
    send_text(&mut tx, "kept").await;
    let mut rx = receiver(&mut session, "rx-drop", &drop_address).await;
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("dropped"));
    step("modify", rx.modify(&d, failed()))
        .await
        .expect("modify");
    let d = recv(&mut rx).await;
    assert_eq!(
        body_text(d.message()).as_deref(),
        Some("kept"),
        "dropped, not redelivered"
    );
    step("accept", rx.accept(&d)).await.expect("accept");
    expect_nothing(&mut rx, Duration::from_millis(200), "the dropped message").await;
    expect_nothing(
        &mut dlq,
        Duration::from_millis(200),
        "nothing else dead-lettered",
    )
    .await;
    step("close", connection.close()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_queue_dead_letters() {
    let broker = broker().await;
    dead_letters_on(&broker, "queues").await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queue_dead_letters() {
    let broker = broker().await;
    dead_letters_on(&broker, "quorum").await;
    stop(broker).await;
}

/// A quorum queue's expired and dropped-head messages, decided by its
/// leader's sweep, go through the outbox too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queue_dead_letters_expired_and_dropped_head() {
    let broker = broker().await;
    let mut connection = connect(&broker, "dl-limits").await;
    let mut session = begin_session(&mut connection).await;
    let mut dlq = receiver(&mut session, "dlq", "/quorum/dlq-limits").await;
    let mut tx = sender(&mut session, "/quorum/ttl-a").await;
    send_text(&mut tx, "expired").await;
    expect_dead_letter(&mut dlq, "expired", "/quorum/ttl-a", "expired").await;
    let mut tx = sender(&mut session, "/quorum/len-a").await;
    send_text(&mut tx, "oldest").await;
    send_text(&mut tx, "newest").await;
    expect_dead_letter(&mut dlq, "oldest", "/quorum/len-a", "maxlen").await;
    let mut rx = receiver(&mut session, "rx", "/quorum/len-a").await;
    let d = recv(&mut rx).await;
    assert_eq!(body_text(d.message()).as_deref(), Some("newest"));
    step("accept", rx.accept(&d)).await.expect("accept");
    step("close", connection.close()).await.expect("close");
    stop(broker).await;
}

/// Across kinds: a transient queue dead-letters into a quorum queue
/// (through its proposer), a quorum queue into a transient one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_cross_queue_kinds() {
    let broker = broker().await;
    let mut connection = connect(&broker, "dl-cross").await;
    let mut session = begin_session(&mut connection).await;
    for (src, dlq_address) in [
        ("/queues/t2q-a", "/quorum/dlq-cross"),
        ("/quorum/q2t-a", "/queues/dlq-cross"),
    ] {
        let mut dlq = receiver(&mut session, &format!("dlq-{src}"), dlq_address).await;
        let mut tx = sender(&mut session, src).await;
        send_text(&mut tx, "crossing").await;
        let mut rx = receiver(&mut session, &format!("rx-{src}"), src).await;
        let d = recv(&mut rx).await;
        step("reject", rx.reject(&d, None)).await.expect("reject");
        expect_dead_letter(&mut dlq, "crossing", src, "rejected").await;
    }
    // Links of the loop were dropped without a detach: close bounded.
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;
    stop(broker).await;
}
