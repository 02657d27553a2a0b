//! Guards against the filter echo: the broker's attach reply used to copy
//! the consumer's source, filters included, although it applies none. A JMS
//! client with a selector then believed the selector active and received
//! every message. The sender's reply must state the terminus actually in
//! place (AMQP 1.0 section 3.5.3): no filter, and no `copy` distribution
//! mode (a queue's consumers always take messages), the rest of the source
//! as asked, so a client that needs a filter can detach.

mod common;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::link::ReceiverAttachError;
use fe2o3_amqp::types::messaging::{DistributionMode, Source as FeSource};
use fe2o3_amqp::Receiver;
use ramqpd_broker::codec::{Descriptor, Performative, Role, Symbol, Value};

/// The selector filter's key and descriptor as JMS clients send them
/// (Qpid Proton's `Selector`, Qpid JMS).
const SELECTOR_KEY: &str = "jms-selector";
const SELECTOR_DESCRIPTOR: u64 = 0x0000_468C_0000_0004;

/// A source for `/queues/<queue>` with a selector and the `copy` mode.
/// fe2o3 cannot build a described filter value from outside its crate, so
/// the entry uses the legacy format (a plain string), which many clients
/// still send; the broker must leave it out of its reply all the same.
fn filtered_source(queue: &str) -> FeSource {
    FeSource::builder()
        .address(format!("/queues/{queue}"))
        .add_to_filter_using_legacy_format(SELECTOR_KEY, "colour = 'red'")
        .distribution_mode(DistributionMode::Copy)
        .build()
}

#[tokio::test]
async fn fe2o3_receiver_requiring_a_filter_sees_it_is_not_in_place() {
    let broker = start().await;
    let mut connection = connect(&broker, "filter-fe2o3").await;
    let mut session = begin_session(&mut connection).await;
    // fe2o3 compares the reply's filter with the one it asked for and
    // gives up the link when an entry is missing, as the spec intends.
    let refused = step(
        "fe2o3 filtered receiver attach",
        Receiver::builder()
            .name("filtered")
            .source(filtered_source("filtered"))
            .attach(&mut session),
    )
    .await;
    match refused {
        Err(ReceiverAttachError::DesiredFilterNotSupported(e)) => {
            assert_eq!(e.not_supported, vec![SELECTOR_KEY.into()]);
        }
        Err(other) => panic!("expected DesiredFilterNotSupported, got {other:?}"),
        Ok(_) => panic!("the attach succeeded: the broker claimed the filter"),
    }
    // The connection and session go on.
    let mut sender = attach_sender(&mut session, "filtered-sender", "filtered").await;
    send_text(&mut sender, "blue").await;
    let mut receiver = attach_receiver(&mut session, "plain", "filtered", 1).await;
    let (delivery, text) = recv_text(&mut receiver).await;
    assert_eq!(text, "blue");
    step("accept", receiver.accept(&delivery))
        .await
        .expect("accept sent");
    sender.close().await.expect("sender closes");
    receiver.close().await.expect("receiver closes");
    session.close().await.expect("session ends");
    connection.close().await.expect("connection closes");
    stop(broker).await;
}

#[tokio::test]
async fn fe2o3_receiver_that_tolerates_no_filter_reads_the_source_in_place() {
    let broker = start().await;
    let mut connection = connect(&broker, "filter-fe2o3-lenient").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = step(
        "fe2o3 lenient filtered receiver attach",
        Receiver::builder()
            .name("filtered-lenient")
            .source(filtered_source("lenient"))
            .verify_incoming_source(false)
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .expect("receiver attaches");
    // fe2o3 replaces its source with the one in the broker's reply.
    let remote = receiver.source().clone().expect("the reply has a source");
    assert_eq!(remote.filter, None, "no filter is applied: {remote:?}");
    assert_eq!(remote.distribution_mode, None, "not copy: {remote:?}");
    assert_eq!(
        remote.address.as_deref(),
        Some("/queues/lenient"),
        "the address is kept"
    );
    // The link is an unfiltered consumer: it gets the message the
    // selector would have excluded.
    let mut sender = attach_sender(&mut session, "lenient-sender", "lenient").await;
    send_text(&mut sender, "blue").await;
    step("set credit", receiver.set_credit(1))
        .await
        .expect("credit granted");
    let (delivery, text) = recv_text(&mut receiver).await;
    assert_eq!(text, "blue");
    step("accept", receiver.accept(&delivery))
        .await
        .expect("accept sent");
    sender.close().await.expect("sender closes");
    receiver.close().await.expect("receiver closes");
    session.close().await.expect("session ends");
    connection.close().await.expect("connection closes");
    stop(broker).await;
}

#[tokio::test]
async fn raw_attach_with_a_described_selector_gets_a_source_without_filter() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let mut request = attach(0, Role::Receiver, "filtered-raw");
    let selector = Value::Described(Box::new((
        Descriptor::Code(SELECTOR_DESCRIPTOR),
        Value::String("colour = 'red'".into()),
    )));
    let source = request
        .source
        .as_mut()
        .expect("frames::attach sets a source");
    source.filter = Some(vec![(Symbol::from(SELECTOR_KEY), selector)]);
    source.distribution_mode = Some(Symbol::from("move"));
    source.capabilities = vec![Symbol::from("queue")];
    raw.send(0, Performative::Attach(Box::new(request))).await;
    let reply = match raw.performative().await {
        (_, Performative::Attach(reply), _) => reply,
        other => panic!("expected attach, got {other:?}"),
    };
    let source = reply.source.expect("the link is served: a source");
    assert_eq!(source.filter, None, "no filter is applied: {source:?}");
    // What the broker does do is still stated as asked.
    assert_eq!(source.address.as_deref(), Some("/queues/filtered-raw"));
    assert_eq!(source.distribution_mode, Some(Symbol::from("move")));
    assert_eq!(source.capabilities, vec![Symbol::from("queue")]);
    stop(broker).await;
}
