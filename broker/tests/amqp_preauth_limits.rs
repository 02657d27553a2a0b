//! Guards the limits that hold before a peer has logged in: connections
//! per source address (`[limits] max_connections_per_address`, dropped at
//! accept) and the frame size before `open`
//! (`[limits] max_frame_size_before_open_bytes`, for SASL frames and the
//! `open` itself), while a logged-in connection keeps the full
//! max-frame-size.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::Connection;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::{Performative, SaslFrame, SaslInit, Symbol};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_of_one_address_are_dropped_and_the_slot_comes_back() {
    let broker = start_with(|c| c.limits.max_connections_per_address = 3).await;
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(connect(&broker, &format!("held-{i}")).await);
    }
    // The fourth from 127.0.0.1 is closed before any byte is answered.
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.write_lenient(&ramqpd_broker::codec::frame::AMQP_HEADER)
        .await;
    raw.expect_eof().await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        Connection::open("fourth", broker.url().as_str()),
    )
    .await
    .expect("the refusal is prompt");
    assert!(refused.is_err(), "a fourth connection opened");
    // Closing one frees its slot once its task has ended.
    let mut first = held.remove(0);
    step("close", first.close()).await.unwrap();
    let reopened = within(
        Duration::from_secs(5),
        "a connection in the freed slot",
        async {
            loop {
                if let Ok(connection) = Connection::open("again", broker.url().as_str()).await {
                    return connection;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        },
    )
    .await;
    held.push(reopened);
    for mut connection in held {
        step("close", connection.close()).await.unwrap();
    }
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_over_the_pre_open_limit_is_a_framing_error() {
    let broker = start_with(|c| c.limits.max_frame_size_before_open_bytes = 1024).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.amqp_header().await;
    // An open of about 2 KB: fine after open, too large before it.
    raw.send(0, Performative::Open(Box::new(open(&"x".repeat(2000)))))
        .await;
    let error = raw.expect_close().await.expect("close carries an error");
    assert_eq!(error.condition.as_str(), condition::FRAMING_ERROR);
    assert!(
        error
            .description
            .as_deref()
            .unwrap_or("")
            .contains("before open"),
        "{error:?}"
    );
    raw.expect_eof().await;
    // An open under the limit, then a frame far over it, is served.
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "big-after-open").await;
    let body = "y".repeat(16 * 1024);
    raw.publish(0, 0, 0, &text_message(&body)).await;
    let mut consumer = Raw::connect(broker.local_addr()).await;
    consumer.open().await;
    consumer.begin(0).await;
    consumer.attach_consumer(0, 0, "big-after-open").await;
    consumer
        .send(0, Performative::Flow(credit_flow(0, 0, 1, false)))
        .await;
    let delivery = consumer.delivery().await;
    assert!(delivery.payload.len() > 16 * 1024);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_frame_over_the_pre_open_limit_ends_the_connection() {
    let broker = start_with(|c| c.limits.max_frame_size_before_open_bytes = 1024).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.sasl_start().await;
    let password = vec![b'p'; 4096];
    let mut response = b"\0guest\0".to_vec();
    response.extend_from_slice(&password);
    raw.send_sasl(SaslFrame::Init(SaslInit {
        mechanism: Symbol::from("PLAIN"),
        initial_response: Some(response.into()),
        hostname: None,
    }))
    .await;
    raw.expect_eof().await;
    // A small one is still answered.
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.sasl_start().await;
    assert_eq!(
        raw.sasl_init("ANONYMOUS", None).await,
        ramqpd_broker::codec::SaslCode::Ok
    );
    stop(broker).await;
}
