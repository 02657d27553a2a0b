//! Filters on a receiver's source, with fe2o3-amqp: a JMS selector
//! (`apache.org:selector-filter:string`) and RabbitMQ's
//! `amqp:application-properties-filter` are applied at dispatch on
//! transient and quorum queues (messages a filter passes over stay, in
//! order, for other consumers), also for a consumer attached at a node that
//! does not lead the queue; the attach reply echoes exactly the filters
//! applied; a selector that does not parse refuses the attach with
//! amqp:invalid-field.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::link::ReceiverAttachError;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp::types::messaging::{ApplicationProperties, Message, Source as FeSource};
use fe2o3_amqp::types::primitives::{SimpleValue, Value as FeValue};
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::{BrokerConfig, Cluster};
use serde_amqp::described::Described;
use serde_amqp::descriptor::Descriptor;

const SELECTOR_CODE: u64 = 0x0000_468C_0000_0004;

fn selector(text: &str) -> Described<FeValue> {
    Described {
        descriptor: Descriptor::Code(SELECTOR_CODE),
        value: FeValue::String(text.to_owned()),
    }
}

/// `amqp:application-properties-filter` on `colour`.
fn colour_filter(colour: &str) -> Described<FeValue> {
    let mut map = fe2o3_amqp::types::primitives::OrderedMap::new();
    map.insert(
        FeValue::String("colour".to_owned()),
        FeValue::String(colour.to_owned()),
    );
    Described {
        descriptor: Descriptor::Name("amqp:application-properties-filter".into()),
        value: FeValue::Map(map),
    }
}

async fn send_coloured(sender: &mut Sender, colour: &str, text: &str) {
    let message = Message::builder()
        .application_properties(
            ApplicationProperties::builder()
                .insert("colour", SimpleValue::String(colour.to_owned()))
                .build(),
        )
        .value(text.to_owned())
        .build();
    let outcome = step("send", sender.send(message))
        .await
        .expect("send succeeds");
    assert!(outcome.is_accepted(), "{outcome:?}");
}

/// Attach a receiver with `filters` (key, filter) on `address`; fe2o3
/// checks that the reply's source holds every filter asked for.
async fn filtered_receiver(
    session: &mut Sess,
    name: &str,
    address: &str,
    filters: Vec<(&str, Described<FeValue>)>,
) -> Result<Receiver, ReceiverAttachError> {
    let mut source = FeSource::builder().address(address.to_owned());
    for (key, filter) in filters {
        source = source.add_to_filter(key, filter);
    }
    step(
        "filtered receiver attach",
        Receiver::builder()
            .name(name.to_owned())
            .source(source.build())
            .credit_mode(CreditMode::Manual)
            .attach(session),
    )
    .await
}

/// Publish blue/red messages to `address`: a filtered receiver gets the
/// red ones only; a plain one then gets the blue ones, in order.
async fn only_matches_and_the_rest_stays(
    broker_url: &str,
    address: &str,
    filter: Described<FeValue>,
) {
    let mut connection = step(
        "connect",
        fe2o3_amqp::Connection::open("filters", broker_url),
    )
    .await
    .expect("connects");
    let mut session = begin_session(&mut connection).await;
    let mut sender = step("sender", Sender::attach(&mut session, "tx", address))
        .await
        .expect("sender attaches");
    for (colour, text) in [("blue", "b1"), ("red", "r1"), ("blue", "b2"), ("red", "r2")] {
        send_coloured(&mut sender, colour, text).await;
    }
    let mut picky = filtered_receiver(&mut session, "picky", address, vec![("f", filter.clone())])
        .await
        .expect("the filtered receiver attaches (its filter is echoed)");
    let echoed = picky
        .source()
        .clone()
        .and_then(|s| s.filter)
        .expect("a filter set");
    assert_eq!(echoed.len(), 1);
    let key: fe2o3_amqp::types::primitives::Symbol = "f".into();
    assert_eq!(
        echoed.get(&key),
        Some(&FeValue::Described(Box::new(filter)))
    );
    step("credit", picky.set_credit(10)).await.expect("credit");
    for want in ["r1", "r2"] {
        let (delivery, text) = recv_text(&mut picky).await;
        assert_eq!(text, want);
        step("accept", picky.accept(&delivery))
            .await
            .expect("accept");
    }
    expect_nothing(
        &mut picky,
        Duration::from_millis(300),
        "no other red message",
    )
    .await;
    let mut plain = step(
        "plain receiver",
        Receiver::builder()
            .name("plain")
            .source(address)
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .expect("plain receiver attaches");
    // Credit for the two blue ones only, so that it competes for nothing
    // after them.
    step("credit", plain.set_credit(2)).await.expect("credit");
    for want in ["b1", "b2"] {
        let (delivery, text) = recv_text(&mut plain).await;
        assert_eq!(text, want);
        step("accept", plain.accept(&delivery))
            .await
            .expect("accept");
    }
    // A new red message published now goes to the filtered receiver.
    send_coloured(&mut sender, "red", "r3").await;
    let (delivery, text) = recv_text(&mut picky).await;
    assert_eq!(text, "r3");
    step("accept", picky.accept(&delivery))
        .await
        .expect("accept");
    let _ = picky.close().await;
    let _ = plain.close().await;
    let _ = sender.close().await;
    let _ = connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_and_property_filters_on_transient_and_quorum_queues() {
    let broker = start().await;
    let url = broker.url().to_string();
    for address in ["/queues/sel", "/quorum/sel"] {
        only_matches_and_the_rest_stays(
            &url,
            address,
            selector("colour = 'red' AND JMSPriority = 4"),
        )
        .await;
    }
    for address in ["/queues/eq", "/quorum/eq"] {
        only_matches_and_the_rest_stays(&url, address, colour_filter("red")).await;
    }
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_selector_refuses_and_unknown_filters_are_not_echoed() {
    let broker = start().await;
    let mut connection = connect(&broker, "filters-bad").await;
    let mut session = begin_session(&mut connection).await;
    match filtered_receiver(
        &mut session,
        "bad",
        "/queues/bad",
        vec![("s", selector("colour = "))],
    )
    .await
    {
        Err(ReceiverAttachError::RemoteClosedWithError(error)) => {
            assert_eq!(
                error.condition,
                ErrorCondition::AmqpError(AmqpError::InvalidField),
                "{error:?}"
            );
        }
        Err(other) => panic!("expected amqp:invalid-field, got {other:?}"),
        Ok(_) => panic!("a selector that does not parse was accepted"),
    }
    // An unknown filter type is neither applied nor echoed: a client that
    // requires it sees it missing...
    let unknown = Described {
        descriptor: Descriptor::Code(0x0000_468C_0000_9999),
        value: FeValue::String("whatever".to_owned()),
    };
    let filters = vec![("s", selector("colour = 'red'")), ("u", unknown)];
    // (a fresh session: fe2o3 leaves one whose attach was refused unusable)
    let mut session = begin_session(&mut connection).await;
    match filtered_receiver(&mut session, "unknown", "/queues/bad", filters.clone()).await {
        Err(ReceiverAttachError::DesiredFilterNotSupported(e)) => {
            assert_eq!(e.not_supported, vec!["u".into()]);
        }
        other => panic!("expected the unknown filter missing, got {other:?}"),
    }
    // ...and one that tolerates it reads exactly the selector back.
    let mut source = FeSource::builder().address("/queues/bad");
    for (key, filter) in filters {
        source = source.add_to_filter(key, filter);
    }
    let lenient = step(
        "lenient receiver",
        Receiver::builder()
            .name("lenient")
            .source(source.build())
            .verify_incoming_source(false)
            .attach(&mut session),
    )
    .await
    .expect("attaches");
    let echoed = lenient
        .source()
        .clone()
        .and_then(|s| s.filter)
        .expect("filters");
    let keys: Vec<String> = echoed.keys().map(|k| k.to_string()).collect();
    assert_eq!(keys, vec!["s".to_owned()]);
    let _ = lenient.close().await;
    let _ = connection.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_at_a_follower_keeps_its_selector() {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    let cluster = Cluster::start(3, config).await.expect("cluster starts");
    publish(cluster.addr(1).expect("node 1"), "fwd-sel", &[]).await;
    let mut leader = None;
    eventually(Duration::from_secs(10), "a leader", || {
        leader = cluster.leader_of("fwd-sel");
        leader.is_some()
    })
    .await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| Some(*n) != leader)
        .expect("a follower");
    let url = format!("amqp://{}", cluster.addr(follower).expect("follower addr"));
    only_matches_and_the_rest_stays(&url, "/quorum/fwd-sel", selector("colour LIKE 'r%'")).await;
    cluster.shutdown().await;
}
