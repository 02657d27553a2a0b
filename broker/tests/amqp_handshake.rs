//! Guards the connection handshake step by step, as clients that wait for
//! each answer (fe2o3-amqp among them) drive it: the broker answers our
//! AMQP protocol header before we send `open`, with and without a SASL
//! layer before it, and then answers `open` with its own.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::codec::frame::AMQP_HEADER;
use ramqpd_broker::codec::{Performative, SaslCode};

/// After our AMQP header, the broker's must arrive without us sending
/// anything else; then open is answered.
async fn header_then_open(raw: &mut Raw) {
    raw.write(&AMQP_HEADER).await;
    let header = within(
        Duration::from_secs(2),
        "the broker's AMQP header, before we send open",
        raw.read_bytes(8),
    )
    .await;
    assert_eq!(header, AMQP_HEADER);
    raw.send(0, Performative::Open(Box::new(open("step-by-step"))))
        .await;
    match raw.performative().await {
        (0, Performative::Open(o), _) => assert!(!o.container_id.is_empty()),
        other => panic!("expected open, got {other:?}"),
    }
    raw.begin(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_header_is_answered_before_open_is_sent() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    header_then_open(&mut raw).await;
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_header_after_sasl_is_answered_before_open_is_sent() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let mechanisms = raw.sasl_start().await;
    assert!(
        mechanisms.iter().any(|m| m == "ANONYMOUS"),
        "{mechanisms:?}"
    );
    assert_eq!(raw.sasl_init("ANONYMOUS", None).await, SaslCode::Ok);
    header_then_open(&mut raw).await;
    drop(raw);
    stop(broker).await;
}
