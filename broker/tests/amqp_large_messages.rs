//! Guards multi-frame transfers and the message-size limit: a 16 MiB body
//! travels through the broker split into frames of at most 4096 bytes in
//! both directions and arrives identical; the broker never sends a frame
//! larger than the peer's max-frame-size and reassembles frames a publisher
//! split itself; a message above `limits.max_message_size_bytes` detaches
//! its link with amqp:link:message-size-exceeded (and is not queued), while
//! the connection carries on.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use fe2o3_amqp::link::SendError;
use fe2o3_amqp::types::messaging::{Data, Message};
use fe2o3_amqp::types::primitives::Binary;
use fe2o3_amqp::Connection;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::{DeliveryState, Detach, Performative, Transfer, Value};

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_mib_body_over_4096_byte_frames() {
    const SIZE: usize = 16 * 1024 * 1024;
    // The broker accepts frames of at most 4096 bytes, and the client asks
    // for the same: every transfer is split both ways.
    let broker = start_with(|c| c.limits.max_frame_size_bytes = 4096).await;
    let mut connection = within(
        Duration::from_secs(10),
        "open with max-frame-size 4096",
        Connection::builder()
            .container_id("big")
            .max_frame_size(4096)
            .open(broker.url().as_str()),
    )
    .await
    .expect("connection opens");
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "big-tx", "big").await;
    let mut rx = attach_receiver(&mut session, "big-rx", "big", 1).await;

    let body = pattern(SIZE);
    let message = Message::builder().data(Binary::from(body.clone())).build();
    let outcome = within(Duration::from_secs(40), "send 16 MiB", tx.send(message))
        .await
        .expect("16 MiB send");
    assert!(outcome.is_accepted(), "{outcome:?}");

    let delivery = within(Duration::from_secs(40), "receive 16 MiB", rx.recv::<Data>())
        .await
        .expect("16 MiB receive");
    let received = &delivery.body().0;
    assert_eq!(received.len(), SIZE, "body length");
    assert!(received.as_slice() == body.as_slice(), "body differs");
    step("accept", rx.accept(&delivery)).await.unwrap();
    eventually(Duration::from_secs(5), "queue empty", || {
        depth(&broker, "big") == Some((0, 0, 1))
    })
    .await;

    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_frames_respect_max_frame_size_and_reassemble() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let mut our_open = open("small-frames");
    our_open.max_frame_size = 512; // the smallest a peer may announce
    raw.open_with(our_open).await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "frames").await;

    // Publish a 20 kB message split by us into 100-byte chunks.
    let message = encode(&[section(0x75, Value::Binary(Bytes::from(pattern(20_000))))]);
    let chunks: Vec<&[u8]> = message.chunks(100).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let t = if i == 0 {
            Transfer {
                more: !last,
                ..transfer(0, 0, false)
            }
        } else {
            Transfer {
                handle: 0,
                more: !last,
                ..Transfer::default()
            }
        };
        raw.send_with_payload(0, Performative::Transfer(t), chunk)
            .await;
    }
    let disposition = loop {
        match raw.performative().await {
            (_, Performative::Disposition(d), _) => break d,
            (_, Performative::Flow(_), _) => continue,
            other => panic!("expected disposition, got {other:?}"),
        }
    };
    assert_eq!(disposition.first, 0);
    assert_eq!(disposition.state, Some(DeliveryState::Accepted));

    // Consume it: the broker must split it into frames of <= 512 bytes.
    raw.attach_consumer(0, 1, "frames").await;
    raw.send(0, Performative::Flow(credit_flow(1, 0, 1, false)))
        .await;
    let delivery = raw.delivery().await;
    assert!(
        delivery.largest_frame <= 512,
        "a frame of {} bytes exceeds our max-frame-size 512",
        delivery.largest_frame
    );
    assert!(
        delivery.frames >= message.len() / 512,
        "{} frames for {} bytes",
        delivery.frames,
        message.len()
    );
    assert_eq!(delivery.payload, message, "reassembled message differs");
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_sees_the_advertised_max_message_size() {
    let broker = start_with(|c| c.limits.max_message_size_bytes = 1024).await;
    let mut connection = connect(&broker, "mms").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "mms").await;
    assert_eq!(tx.max_message_size(), Some(1024));
    let big = Message::builder()
        .data(Binary::from(vec![1u8; 4096]))
        .build();
    match step("oversized send", tx.send(big)).await {
        Err(SendError::MessageSizeExceeded(e)) => assert_eq!(e.max_size, 1024),
        other => panic!("expected a local message-size error, got {other:?}"),
    }
    // Small messages still go through.
    send_text(&mut tx, "small").await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// Read until the broker's detach of `handle`.
async fn expect_detach(raw: &mut Raw, handle: u32) -> Detach {
    loop {
        match raw.performative().await {
            (_, Performative::Detach(d), _) => {
                assert_eq!(d.handle, handle);
                return d;
            }
            (_, Performative::Flow(_) | Performative::Disposition(_), _) => continue,
            other => panic!("expected detach, got {other:?}"),
        }
    }
}

/// Answer the broker's detach of `handle`, as the protocol asks.
async fn answer_detach(raw: &mut Raw, handle: u32) {
    raw.send(
        0,
        Performative::Detach(Detach {
            handle,
            closed: true,
            error: None,
        }),
    )
    .await;
}

/// The connection and session carry on after a link was detached: a new
/// link publishes fine, and nothing oversized was queued.
async fn still_publishes(raw: &mut Raw, broker: &ramqpd_broker::Broker, handle: u32) {
    raw.attach_publisher(0, handle, "mms").await;
    let small = text_message("fits");
    let disposition = raw.publish(0, handle, 100, &small).await;
    assert_eq!(disposition.state, Some(DeliveryState::Accepted));
    assert_eq!(
        depth(broker, "mms"),
        Some((1, 0, 0)),
        "only the small message is queued"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_message_detaches_the_link() {
    let broker = start_with(|c| c.limits.max_message_size_bytes = 1024).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;

    // One frame, 2000 bytes: the attach announced 1024, we ignore it.
    let (reply, _) = raw.attach_publisher(0, 0, "mms").await;
    assert_eq!(reply.max_message_size, Some(1024));
    let big = encode(&[section(0x75, Value::Binary(Bytes::from(vec![5u8; 2000])))]);
    raw.send_with_payload(0, Performative::Transfer(transfer(0, 0, false)), &big)
        .await;
    let detach = expect_detach(&mut raw, 0).await;
    assert!(detach.closed, "the link is closed");
    assert_eq!(
        detach.error.as_ref().map(|e| e.condition.as_str()),
        Some(condition::MESSAGE_SIZE_EXCEEDED),
        "{detach:?}"
    );
    answer_detach(&mut raw, 0).await;
    still_publishes(&mut raw, &broker, 1).await;
    drop(raw);
    assert_serves(&broker, "after-mms").await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_multi_frame_message_detaches_the_link() {
    let broker = start_with(|c| c.limits.max_message_size_bytes = 1024).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "mms").await;

    // Four frames of 400 bytes, each small, together too big. A client
    // streams them without waiting, so the last one is still in flight
    // when the broker detaches the link after the third.
    let chunk = vec![0u8; 400];
    for i in 0..4 {
        let t = if i == 0 {
            Transfer {
                more: true,
                ..transfer(0, 0, false)
            }
        } else {
            Transfer {
                handle: 0,
                more: i < 3,
                ..Transfer::default()
            }
        };
        raw.send_with_payload(0, Performative::Transfer(t), &chunk)
            .await;
    }
    let detach = expect_detach(&mut raw, 0).await;
    assert!(detach.closed);
    assert_eq!(
        detach.error.as_ref().map(|e| e.condition.as_str()),
        Some(condition::MESSAGE_SIZE_EXCEEDED),
        "{detach:?}"
    );
    answer_detach(&mut raw, 0).await;
    still_publishes(&mut raw, &broker, 1).await;
    drop(raw);
    stop(broker).await;
}
