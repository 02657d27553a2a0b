//! Consumer priority (attach property `rabbitmq:priority`, or `priority`)
//! and single active consumer (policy) with the third-party client
//! (fe2o3-amqp), on one broker: a high-priority consumer with credit gets
//! every message, a low one only while the high one has none; with a
//! single active consumer on a transient and on a quorum queue, the
//! second consumer gets nothing while the first is attached and takes over
//! when it detaches, before the third.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::Fields;
use fe2o3_amqp::types::primitives::{Symbol, Value};
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::config::PolicyConfig;

/// Long enough to see that a message is not coming, short for the suite.
const QUIET: Duration = Duration::from_millis(500);

async fn receiver(
    session: &mut Sess,
    name: &str,
    address: &str,
    priority: Option<(&str, Value)>,
    credit: u32,
) -> Receiver {
    let mut builder = Receiver::builder()
        .name(name.to_string())
        .source(address.to_string())
        .credit_mode(CreditMode::Manual);
    if let Some((key, value)) = priority {
        let mut properties = Fields::new();
        properties.insert(Symbol::from(key), value);
        builder = builder.properties(properties);
    }
    let mut receiver = step("receiver attach", builder.attach(session))
        .await
        .expect("receiver attaches");
    if credit > 0 {
        step("credit", receiver.set_credit(credit))
            .await
            .expect("credit");
    }
    receiver
}

async fn sender(session: &mut Sess, address: &str) -> Sender {
    step(
        "sender attach",
        Sender::attach(session, "tx".to_string(), address.to_string()),
    )
    .await
    .expect("sender attaches")
}

/// Receive `n` texts, accepting each.
async fn take(receiver: &mut Receiver, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        let (delivery, text) = recv_text(receiver).await;
        step("accept", receiver.accept(&delivery))
            .await
            .expect("accept");
        got.push(text);
    }
    got
}

async fn send_all(sender: &mut Sender, texts: &[&str]) {
    for text in texts {
        send_text(sender, text).await;
    }
}

#[tokio::test]
async fn priority_consumers_first_while_they_have_credit() {
    let broker = start().await;
    for address in ["/queues/prio", "/quorum/prio"] {
        priority_order(&broker, address).await;
    }
    stop(broker).await;
}

async fn priority_order(broker: &ramqpd_broker::Broker, address: &str) {
    let mut connection = connect(broker, "priorities").await;
    let mut session = begin_session(&mut connection).await;
    // The low one attaches first and has credit all along.
    let mut low = receiver(&mut session, "low", address, None, 20).await;
    let mut high = receiver(
        &mut session,
        "high",
        address,
        Some(("rabbitmq:priority", Value::Int(5))),
        3,
    )
    .await;
    let mut tx = sender(&mut session, address).await;
    send_all(&mut tx, &["a", "b", "c"]).await;
    assert_eq!(take(&mut high, 3).await, ["a", "b", "c"]);
    expect_nothing(&mut low, QUIET, "the high-priority consumer had credit").await;
    // The high one has no credit left: the low one gets the rest.
    send_all(&mut tx, &["d", "e"]).await;
    assert_eq!(take(&mut low, 2).await, ["d", "e"]);
    // Credit back: the high one again.
    step("credit", high.set_credit(1)).await.expect("credit");
    send_all(&mut tx, &["f"]).await;
    assert_eq!(take(&mut high, 1).await, ["f"]);
    expect_nothing(&mut low, QUIET, "the high one had credit again").await;
    // Artemis's key works the same; a negative priority is below 0.
    let mut lowest = receiver(
        &mut session,
        "lowest",
        address,
        Some(("priority", Value::Long(-1))),
        5,
    )
    .await;
    send_all(&mut tx, &["g"]).await;
    assert_eq!(take(&mut low, 1).await, ["g"]);
    expect_nothing(&mut lowest, QUIET, "priority -1 is below 0").await;

    // A priority that is not a 32-bit integer refuses the attach.
    let mut properties = Fields::new();
    properties.insert(
        Symbol::from("rabbitmq:priority"),
        Value::String("high".into()),
    );
    let refused = step(
        "attach with a bad priority",
        Receiver::builder()
            .name("bad")
            .source(address)
            .properties(properties)
            .attach(&mut session),
    )
    .await;
    let error = format!("{refused:?}");
    assert!(refused.is_err(), "a bad priority must be refused");
    assert!(
        error.contains("invalid-field") || error.contains("InvalidField"),
        "{error}"
    );
    let _ = connection.close().await;
}

/// One consumer at a time on `address`: the first attached gets every
/// message, the second takes over when it detaches, then the third.
async fn single_active_in_order(broker: &ramqpd_broker::Broker, address: &str) {
    let mut connection = connect(broker, "sac").await;
    let mut session = begin_session(&mut connection).await;
    let mut first = receiver(&mut session, "first", address, None, 10).await;
    let mut second = receiver(&mut session, "second", address, None, 10).await;
    let mut third = receiver(&mut session, "third", address, None, 10).await;
    let mut tx = sender(&mut session, address).await;
    send_all(&mut tx, &["1", "2", "3"]).await;
    assert_eq!(take(&mut first, 3).await, ["1", "2", "3"]);
    expect_nothing(&mut second, QUIET, "the first consumer is the active one").await;
    expect_nothing(
        &mut third,
        Duration::ZERO,
        "the first consumer is the active one",
    )
    .await;
    // One left unsettled goes back when the active one detaches, and goes
    // to the next in order with the new ones.
    send_all(&mut tx, &["4"]).await;
    let (_unsettled, text) = recv_text(&mut first).await;
    assert_eq!(text, "4");
    step("detach the active one", first.close())
        .await
        .expect("detach");
    send_all(&mut tx, &["5"]).await;
    assert_eq!(take(&mut second, 2).await, ["4", "5"]);
    expect_nothing(&mut third, QUIET, "the second consumer took over").await;
    step("detach the second", second.close())
        .await
        .expect("detach");
    send_all(&mut tx, &["6"]).await;
    assert_eq!(take(&mut third, 1).await, ["6"]);
    let _ = connection.close().await;
}

#[tokio::test]
async fn single_active_consumer_on_transient_and_quorum_queues() {
    let broker = start_with(|config| {
        for pattern in ["/queues/sac-*", "/quorum/sac-*"] {
            config.policies.push(PolicyConfig {
                pattern: pattern.to_string(),
                single_active_consumer: true,
                ..PolicyConfig::default()
            });
        }
    })
    .await;
    single_active_in_order(&broker, "/queues/sac-t").await;
    single_active_in_order(&broker, "/quorum/sac-q").await;
    // Without the policy every consumer gets its share.
    let mut connection = connect(&broker, "plain").await;
    let mut session = begin_session(&mut connection).await;
    let mut a = receiver(&mut session, "a", "/queues/plain", None, 10).await;
    let mut b = receiver(&mut session, "b", "/queues/plain", None, 10).await;
    let mut tx = sender(&mut session, "/queues/plain").await;
    send_all(&mut tx, &["x", "y"]).await;
    assert_eq!(take(&mut a, 1).await, ["x"]);
    assert_eq!(take(&mut b, 1).await, ["y"]);
    let _ = connection.close().await;
    stop(broker).await;
}
