//! Queue policies' length limits and TTL with a real client (fe2o3-amqp),
//! on a transient and a quorum queue of one broker: the policies come
//! from the configuration and apply to the matching queues only.
//!
//! - reject-publish: past `max_length` a publish is `rejected` with
//!   amqp:resource-limit-exceeded, the queue holds `max_length`, and the
//!   publisher gets no new credit until a consumer makes room (a link
//!   credit of 2 makes that visible at once);
//! - drop-head: the oldest go, the newest `max_length` stay;
//! - `max_length_bytes` (reject-publish);
//! - a header ttl of 200 ms: not delivered after 1 s, and the sweep
//!   brings the depth to 0 without a consumer; `message_ttl_ms` likewise;
//! - a message posted in a transaction expires as well;
//! - a queue no policy matches takes everything;
//! - a transient queue dead-letters what drop-head drops and what expires
//!   (reasons `maxlen`, `expired`).
//!
//! The quorum side's agreement across replicas is `policies_quorum.rs`.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::transaction::{Controller, Transaction, TransactionDischarge, TransactionPosting};
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{AmqpValue, Header, Message, Outcome};
use fe2o3_amqp::types::primitives::Value as FeValue;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::config::{Overflow, PolicyConfig};
use ramqpd_broker::Broker;

fn policies() -> Vec<PolicyConfig> {
    let limit =
        |pattern: &str, max_length: Option<u64>, max_bytes: Option<u64>, overflow| PolicyConfig {
            pattern: pattern.into(),
            max_length,
            max_length_bytes: max_bytes,
            overflow,
            ..PolicyConfig::default()
        };
    vec![
        limit("/*/capped", Some(3), None, Overflow::RejectPublish),
        limit("/*/newest", Some(3), None, Overflow::DropHead),
        // Three of the test's messages (16 bytes encoded: an amqp-value
        // section of an 11-character string).
        limit(
            "/*/bytes",
            None,
            Some(3 * MESSAGE_BYTES),
            Overflow::RejectPublish,
        ),
        PolicyConfig {
            pattern: "/*/short".into(),
            message_ttl_ms: Some(300),
            ..PolicyConfig::default()
        },
        PolicyConfig {
            pattern: "/queues/dl-src".into(),
            max_length: Some(1),
            overflow: Overflow::DropHead,
            message_ttl_ms: Some(300),
            dead_letter_address: Some("/queues/dl-dlq".into()),
            ..PolicyConfig::default()
        },
    ]
}

/// (ready + unsettled) of the queue at `address`, 0 if unknown.
fn held(broker: &Broker, address: &str) -> usize {
    broker
        .queues()
        .into_iter()
        .find(|q| q.address == address)
        .map_or(0, |q| q.ready + q.unsettled)
}

const MESSAGE_BYTES: u64 = 16;

/// A fixed-size (16 bytes encoded) message, optionally with a header ttl.
fn message(n: usize, ttl_ms: Option<u32>) -> Message<AmqpValue<String>> {
    let body = format!("message {n:03}");
    match ttl_ms {
        None => Message::builder().value(body).build(),
        Some(ttl) => Message::builder()
            .header(Header {
                ttl: Some(ttl),
                ..Header::default()
            })
            .value(body)
            .build(),
    }
}

async fn send(sender: &mut Sender, n: usize) -> Outcome {
    step(
        "send (waits for the outcome)",
        sender.send(message(n, None)),
    )
    .await
    .expect("send succeeds")
}

fn assert_full_rejection(outcome: &Outcome) {
    match outcome {
        Outcome::Rejected(rejected) => {
            let error = rejected
                .error
                .as_ref()
                .expect("an error in the rejected state");
            assert_eq!(
                error.condition,
                ErrorCondition::AmqpError(AmqpError::ResourceLimitExceeded),
                "{error:?}"
            );
        }
        other => panic!("expected rejected, got {other:?}"),
    }
}

async fn receive_all(receiver: &mut Receiver, n: usize) -> Vec<String> {
    let mut texts = Vec::new();
    for _ in 0..n {
        let (delivery, text) = recv_text(receiver).await;
        receiver.accept(&delivery).await.expect("accepts");
        texts.push(text);
    }
    texts
}

async fn attach_sender_to(session: &mut Sess, name: &str, address: &str) -> Sender {
    step("attach sender", Sender::attach(session, name, address))
        .await
        .expect("sender attaches")
}

async fn attach_receiver_to(session: &mut Sess, name: &str, address: &str) -> Receiver {
    step("attach receiver", Receiver::attach(session, name, address))
        .await
        .expect("receiver attaches")
}

/// Every check, on the queues of one kind (`queues` or `quorum`).
async fn limits_and_ttl(broker: &Broker, kind: &str) {
    let mut connection = connect(broker, &format!("limits-{kind}")).await;
    let mut session = begin_session(&mut connection).await;
    let at = |name: &str| format!("/{kind}/{name}");

    // reject-publish: 3 accepted, then rejected; no new credit while full.
    let mut sender = attach_sender_to(&mut session, "capped-tx", &at("capped")).await;
    for n in 0..3 {
        assert!(send(&mut sender, n).await.is_accepted());
    }
    assert_full_rejection(&send(&mut sender, 3).await);
    assert_eq!(held(broker, &at("capped")), 3);
    // The link's credit (2, topped up at half) is used up: while the queue
    // is full no more comes, so this send cannot even start.
    let blocked = tokio::time::timeout(Duration::from_millis(300), sender.send(message(4, None)));
    assert!(
        blocked.await.is_err(),
        "credit was granted to a full queue's publisher"
    );
    let mut receiver = attach_receiver_to(&mut session, "capped-rx", &at("capped")).await;
    assert_eq!(receive_all(&mut receiver, 1).await, ["message 000"]);
    // Room again: credit comes back and the publish goes through.
    assert!(send(&mut sender, 5).await.is_accepted());
    assert_eq!(held(broker, &at("capped")), 3);
    receiver.close().await.expect("detaches");
    sender.close().await.expect("detaches");

    // drop-head: the newest 3 of 6 stay.
    let mut sender = attach_sender_to(&mut session, "newest-tx", &at("newest")).await;
    for n in 0..6 {
        assert!(send(&mut sender, n).await.is_accepted());
    }
    eventually(Duration::from_secs(5), "dropped to 3", || {
        held(broker, &at("newest")) == 3
    })
    .await;
    let mut receiver = attach_receiver_to(&mut session, "newest-rx", &at("newest")).await;
    assert_eq!(
        receive_all(&mut receiver, 3).await,
        ["message 003", "message 004", "message 005"]
    );
    receiver.close().await.expect("detaches");
    sender.close().await.expect("detaches");

    // max_length_bytes: three messages fit, the fourth does not.
    let mut sender = attach_sender_to(&mut session, "bytes-tx", &at("bytes")).await;
    for n in 0..3 {
        assert!(send(&mut sender, n).await.is_accepted());
    }
    let bytes = |b: &Broker| {
        b.queues()
            .into_iter()
            .find(|q| q.address == at("bytes"))
            .map(|q| q.bytes)
    };
    assert_eq!(bytes(broker), Some(3 * MESSAGE_BYTES));
    assert_full_rejection(&send(&mut sender, 3).await);
    sender.close().await.expect("detaches");

    // A header ttl: expired messages are swept without a consumer, and a
    // later consumer gets only the one without a ttl.
    let mut sender = attach_sender_to(&mut session, "ttl-tx", &at("ttl")).await;
    let sent = step("send", sender.send(message(0, Some(200)))).await;
    assert!(sent.expect("sent").is_accepted());
    assert!(send(&mut sender, 1).await.is_accepted());
    eventually(Duration::from_secs(4), "swept to 1", || {
        held(broker, &at("ttl")) == 1
    })
    .await;
    let mut receiver = attach_receiver_to(&mut session, "ttl-rx", &at("ttl")).await;
    assert_eq!(receive_all(&mut receiver, 1).await, ["message 001"]);
    receiver.close().await.expect("detaches");

    // The policy's message_ttl_ms, and never delivered once expired.
    let mut sender2 = attach_sender_to(&mut session, "short-tx", &at("short")).await;
    assert!(send(&mut sender2, 0).await.is_accepted());
    eventually(Duration::from_secs(4), "swept to 0", || {
        held(broker, &at("short")) == 0
    })
    .await;
    let mut receiver = attach_receiver_to(&mut session, "short-rx", &at("short")).await;
    expect_nothing_of(&mut receiver).await;
    receiver.close().await.expect("detaches");

    // A message posted in a transaction expires too (on a quorum queue
    // the leader stamps the transaction's entry).
    let controller = step("controller attach", Controller::attach(&mut session, "ctl"))
        .await
        .expect("the coordinator link attaches");
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    let posted = step("post", txn.post(&mut sender2, message(7, None))).await;
    assert!(posted.expect("answered").is_accepted());
    // Committed: it is in the queue (until it expires, 300 ms on).
    step("commit", txn.commit()).await.expect("committed");
    eventually(Duration::from_secs(4), "the posted one swept", || {
        held(broker, &at("short")) == 0
    })
    .await;
    controller.close().await.expect("detaches");

    // No policy matches: no limit.
    let mut sender3 = attach_sender_to(&mut session, "free-tx", &at("free")).await;
    for n in 0..6 {
        assert!(send(&mut sender3, n).await.is_accepted());
    }
    assert_eq!(held(broker, &at("free")), 6);
    for s in [sender, sender2, sender3] {
        s.close().await.expect("detaches");
    }
    if kind == "queues" {
        dead_letters(&mut session).await;
    }
    session.end().await.expect("ends");
    connection.close().await.expect("closes");
}

/// A transient queue dead-letters what it drops and what expires, with
/// the reasons `maxlen` and `expired` (dead-lettering from quorum queues
/// is not done yet).
async fn dead_letters(session: &mut Sess) {
    let mut dlq = attach_receiver_to(session, "dl-rx", "/queues/dl-dlq").await;
    let mut sender = attach_sender_to(session, "dl-tx", "/queues/dl-src").await;
    assert!(send(&mut sender, 0).await.is_accepted());
    assert!(send(&mut sender, 1).await.is_accepted());
    for (body, reason) in [("message 000", "maxlen"), ("message 001", "expired")] {
        let delivery = recv(&mut dlq).await;
        let message = delivery.message();
        assert_eq!(body_text(message).as_deref(), Some(body));
        let first_reason = message.message_annotations.as_ref().and_then(|a| {
            a.iter().find_map(|(k, v)| match (k, v) {
                (OwnedKey::Symbol(k), FeValue::Symbol(v)) if k.0 == "x-first-death-reason" => {
                    Some(v.0.clone())
                }
                _ => None,
            })
        });
        assert_eq!(first_reason.as_deref(), Some(reason), "{message:?}");
        dlq.accept(&delivery).await.expect("accepts");
    }
    sender.close().await.expect("detaches");
    dlq.close().await.expect("detaches");
}

async fn expect_nothing_of(receiver: &mut Receiver) {
    if let Ok(result) =
        tokio::time::timeout(Duration::from_millis(300), receiver.recv::<String>()).await
    {
        panic!("an expired message was delivered: {result:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_and_quorum_queues_keep_their_limits_and_ttl() {
    let broker = start_with(|c| {
        c.policies = policies();
        // Small, so a full queue's publisher runs out of credit at once.
        c.limits.link_credit = 2;
        fast_raft(c);
    })
    .await;
    limits_and_ttl(&broker, "queues").await;
    limits_and_ttl(&broker, "quorum").await;
    stop(broker).await;
}
