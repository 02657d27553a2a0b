//! Anonymous relay with the third-party client (fe2o3-amqp): the broker
//! offers ANONYMOUS-RELAY in its open; a sender attached with a null target
//! address has each message routed by its `to` to a transient or quorum
//! queue (auto-created as an attach would); a message to an address that
//! cannot exist is rejected with amqp:not-found on that delivery alone, and
//! the same link carries on. On a 3-node cluster, messages relayed through a
//! node that does not lead the quorum queue reach it.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp::types::messaging::{AmqpValue, Message, Outcome, Properties, Target};
use fe2o3_amqp::Sender;
use ramqpd_broker::{BrokerConfig, Cluster};

/// Attach a sender whose target has no address (the anonymous terminus).
async fn anonymous_sender(session: &mut Sess, name: &str) -> Sender {
    step(
        "anonymous sender attach",
        Sender::builder()
            .name(name)
            .target(Target::builder().build())
            .attach(session),
    )
    .await
    .expect("an anonymous sender attaches")
}

/// A text message addressed to `to`.
fn addressed(to: &str, text: &str) -> Message<AmqpValue<String>> {
    Message::builder()
        .properties(Properties::builder().to(to).build())
        .value(text.to_string())
        .build()
}

/// Send and return the outcome.
async fn send_to(sender: &mut Sender, to: &str, text: &str) -> Outcome {
    step("relayed send", sender.send(addressed(to, text)))
        .await
        .expect("the send completes")
}

fn is_not_found(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Rejected(r) if matches!(
            r.error.as_ref().map(|e| &e.condition),
            Some(ErrorCondition::AmqpError(AmqpError::NotFound))
        )
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_offers_anonymous_relay() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let open = raw.open().await;
    assert!(
        open.offered_capabilities
            .iter()
            .any(|c| c.as_str() == "ANONYMOUS-RELAY"),
        "offered: {:?}",
        open.offered_capabilities
    );
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_by_to_and_rejects_only_the_unroutable_delivery() {
    let broker = start().await;
    let mut connection = connect(&broker, "relay").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = anonymous_sender(&mut session, "anon").await;
    let mut rx_a = attach_receiver(&mut session, "rx-a", "relay-a", 10).await;

    let outcome = send_to(&mut tx, "/queues/relay-a", "to a").await;
    assert!(outcome.is_accepted(), "{outcome:?}");
    // Auto-created on the first relayed message, as an attach would.
    let outcome = send_to(&mut tx, "/queues/relay-b", "to b").await;
    assert!(outcome.is_accepted(), "{outcome:?}");
    assert_eq!(depth(&broker, "relay-b"), Some((1, 0, 0)));
    for bad in ["/topics/x", "relay-a", "/queues/a/b"] {
        let outcome = send_to(&mut tx, bad, "lost").await;
        assert!(is_not_found(&outcome), "{bad}: {outcome:?}");
    }
    // No `to` at all.
    let outcome = step("send without to", tx.send("nowhere".to_string()))
        .await
        .expect("send completes");
    assert!(is_not_found(&outcome), "{outcome:?}");
    // The link goes on after the rejections, in order.
    let outcome = send_to(&mut tx, "/queues/relay-a", "to a again").await;
    assert!(outcome.is_accepted(), "{outcome:?}");

    for expected in ["to a", "to a again"] {
        let (delivery, text) = recv_text(&mut rx_a).await;
        assert_eq!(text, expected);
        step("accept", rx_a.accept(&delivery)).await.unwrap();
    }
    let mut rx_b = attach_receiver(&mut session, "rx-b", "relay-b", 10).await;
    let (delivery, text) = recv_text(&mut rx_b).await;
    assert_eq!(text, "to b");
    step("accept", rx_b.accept(&delivery)).await.unwrap();
    step("close sender", tx.close()).await.unwrap();
    step("close connection", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_addresses_are_not_found_when_auto_create_is_off() {
    let broker = start_with(|config| {
        config.queues.auto_create = false;
        config.queues.declare = vec!["known".into()];
    })
    .await;
    let mut connection = connect(&broker, "relay-strict").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = anonymous_sender(&mut session, "anon").await;
    for unknown in ["/queues/unknown", "/quorum/unknown"] {
        let outcome = send_to(&mut tx, unknown, "lost").await;
        assert!(is_not_found(&outcome), "{unknown}: {outcome:?}");
    }
    let outcome = send_to(&mut tx, "/queues/known", "kept").await;
    assert!(outcome.is_accepted(), "{outcome:?}");
    assert_eq!(depth(&broker, "known"), Some((1, 0, 0)));
    assert_eq!(depth(&broker, "unknown"), None, "nothing was created");
    step("close connection", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_to_a_quorum_queue_created_on_first_message() {
    let broker = start().await;
    let mut connection = connect(&broker, "relay-quorum").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = anonymous_sender(&mut session, "anon").await;
    for i in 0..20 {
        let outcome = send_to(&mut tx, "/quorum/relayed", &format!("m{i}")).await;
        assert!(outcome.is_accepted(), "m{i}: {outcome:?}");
    }
    step("close connection", connection.close()).await.unwrap();
    let received = consume(broker.local_addr(), "relayed", 20).await;
    let expected: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    assert_eq!(received, expected, "every relayed message, in order");
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_through_a_follower_to_the_quorum_leader() {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    config.quorum.leader_wait_ms = 5000;
    let cluster = Cluster::start(3, config).await.unwrap();
    publish(cluster.addr(1).unwrap(), "relay-fwd", &[]).await;
    let leader = wait_for_leader(&cluster, "relay-fwd", None, Duration::from_secs(10)).await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .expect("a follower");

    let mut connection = open_at(cluster.addr(follower).unwrap(), "relay-follower").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = anonymous_sender(&mut session, "anon").await;
    for i in 0..50 {
        let outcome = send_to(&mut tx, "/quorum/relay-fwd", &format!("m{i}")).await;
        assert!(outcome.is_accepted(), "m{i}: {outcome:?}");
    }
    // And a queue nobody attached to yet, created through the relay.
    let outcome = send_to(&mut tx, "/quorum/relay-new", "fresh").await;
    assert!(outcome.is_accepted(), "{outcome:?}");
    step("close connection", connection.close()).await.unwrap();

    let received = consume(cluster.addr(leader).unwrap(), "relay-fwd", 50).await;
    let expected: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    assert_eq!(received, expected, "every relayed message, once, in order");
    let fresh = consume(cluster.addr(leader).unwrap(), "relay-new", 1).await;
    assert_eq!(fresh, vec!["fresh".to_string()]);
    cluster.shutdown().await;
}
