//! Guards the broker against bad peers, with raw sockets and no client
//! library: garbage bytes and wrong protocol headers get the broker's own
//! header and a closed socket; an oversized frame, a malformed frame header
//! or body, a performative on a channel never begun, a transfer without
//! credit, and a flow or transfer on an unknown handle each get an AMQP
//! `close` carrying the exact error condition and then EOF; a handshake that
//! stalls is dropped after `limits.handshake_timeout_ms`. After each bad
//! client, a client connected before it and a fresh fe2o3 client both still
//! work: one peer's bad input has no effect on others.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::frame::{AMQP_HEADER, SASL_HEADER};
use ramqpd_broker::codec::{Close, DeliveryState, Detach, End, Flow, Performative};

/// A raw client that has opened a connection and begun session 0.
async fn opened(broker: &ramqpd_broker::Broker) -> Raw {
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw
}

/// After the bad client: the bystander and a fresh client still work.
async fn others_unaffected(broker: &ramqpd_broker::Broker, bystander: &mut Bystander, queue: &str) {
    bystander.check().await;
    assert_serves(broker, queue).await;
}

/// Bytes that are not an AMQP protocol header get the broker's (SASL)
/// header back, then EOF.
async fn refused_header(broker: &ramqpd_broker::Broker, bytes: &[u8]) {
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.write_lenient(bytes).await;
    let header = raw.read_bytes(8).await;
    assert_eq!(header, SASL_HEADER, "answer to {bytes:?}");
    raw.expect_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_get_our_header_and_a_closed_socket() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "garbage").await;
    refused_header(&broker, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    // Something like a TLS ClientHello.
    refused_header(
        &broker,
        &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03],
    )
    .await;
    refused_header(&broker, &[0u8; 64]).await;
    refused_header(&broker, &[0xff; 4096]).await;
    others_unaffected(&broker, &mut bystander, "after-garbage").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_protocol_headers_get_our_header_and_a_closed_socket() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "headers").await;
    for header in [
        *b"AMQP\x00\x02\x00\x00", // another major version
        *b"AMQP\x00\x01\x01\x00", // another minor version
        *b"AMQP\x01\x01\x00\x00", // unknown protocol id
        *b"AMQP\x00\x00\x09\x01", // AMQP 0-9-1
        *b"AMQP\x02\x01\x00\x00", // TLS, not enabled on this listener
        *b"amqp\x00\x01\x00\x00", // wrong case
    ] {
        refused_header(&broker, &header).await;
    }
    others_unaffected(&broker, &mut bystander, "after-headers").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frame_closes_with_framing_error() {
    let broker = start().await;
    let max = ramqpd_broker::BrokerConfig::default()
        .limits
        .max_frame_size_bytes;
    let mut bystander = Bystander::connect(&broker, "oversized").await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let theirs = raw.open().await;
    assert_eq!(theirs.max_frame_size, max, "the broker announces its limit");
    raw.begin(0).await;
    // Announce one byte more than allowed; send only the frame header and
    // a little of the body: the broker must not wait for the rest.
    let mut frame = (max + 1).to_be_bytes().to_vec();
    frame.extend_from_slice(&[2, 0, 0, 0]);
    frame.extend_from_slice(&[0u8; 100]);
    raw.write(&frame).await;
    raw.expect_close_with(condition::FRAMING_ERROR).await;
    raw.expect_eof().await;
    others_unaffected(&broker, &mut bystander, "after-oversized").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frame_header_closes_with_framing_error() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "bad-header").await;
    for header in [
        [0u8, 0, 0, 4, 2, 0, 0, 0],  // size below the 8-byte header
        [0u8, 0, 0, 16, 1, 0, 0, 0], // doff 1: below the minimum of 2
        [0u8, 0, 0, 16, 9, 0, 0, 0], // doff 9 (36 bytes) beyond the frame size
    ] {
        let mut raw = opened(&broker).await;
        let mut frame = header.to_vec();
        frame.resize(16.max(frame.len()), 0);
        raw.write_lenient(&frame).await;
        raw.expect_close_with(condition::FRAMING_ERROR).await;
        raw.expect_eof().await;
    }
    others_unaffected(&broker, &mut bystander, "after-bad-header").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frame_body_closes_with_decode_error() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "bad-body").await;
    let bodies: [&[u8]; 5] = [
        // not a described type at all
        &[0xde, 0xad, 0xbe, 0xef],
        // an unknown performative descriptor (0x99) with an empty list
        &[0x00, 0x53, 0x99, 0x45],
        // flow whose list8 claims 200 fields in 3 bytes
        &[0x00, 0x53, 0x13, 0xc0, 0x03, 0xc8, 0x43, 0x43],
        // attach with its mandatory name and handle null
        &[0x00, 0x53, 0x12, 0xc0, 0x04, 0x03, 0x40, 0x40, 0x42],
        // begin whose list8 size runs past the end of the frame
        &[0x00, 0x53, 0x11, 0xc0, 0x7f, 0x04, 0x40],
    ];
    for body in bodies {
        let mut raw = opened(&broker).await;
        let mut frame = ((8 + body.len()) as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&[2, 0, 0, 0]);
        frame.extend_from_slice(body);
        raw.write(&frame).await;
        let error = raw.expect_close().await;
        assert_eq!(
            error.as_ref().map(|e| e.condition.as_str()),
            Some(condition::DECODE_ERROR),
            "body {body:02x?}: {error:?}"
        );
        raw.expect_eof().await;
    }
    others_unaffected(&broker, &mut bystander, "after-bad-body").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn performative_on_a_channel_never_begun_closes_with_illegal_state() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "no-session").await;
    let performatives = [
        Performative::Attach(Box::new(attach(0, ramqpd_broker::codec::Role::Sender, "x"))),
        Performative::Flow(credit_flow(0, 0, 10, false)),
        Performative::Transfer(transfer(0, 0, false)),
        Performative::Detach(Detach {
            handle: 0,
            closed: true,
            error: None,
        }),
    ];
    for performative in performatives {
        let mut raw = Raw::connect(broker.local_addr()).await;
        raw.open().await;
        // Session 0 exists; channel 3 was never begun.
        raw.begin(0).await;
        let what = format!("{performative:?}");
        let payload: &[u8] = match performative {
            Performative::Transfer(_) => b"\x00\x53\x77\x41",
            _ => b"",
        };
        raw.send_with_payload(3, performative, payload).await;
        let error = raw.expect_close().await;
        assert_eq!(
            error.as_ref().map(|e| e.condition.as_str()),
            Some(condition::ILLEGAL_STATE),
            "{what}: {error:?}"
        );
        raw.expect_eof().await;
    }
    others_unaffected(&broker, &mut bystander, "after-no-session").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_without_credit_closes_with_transfer_limit_exceeded() {
    // A queue holding one message is full: its publishers get no credit.
    let broker = start_with(|c| c.queues.max_messages = 1).await;
    let mut bystander = Bystander::connect(&broker, "no-credit").await;
    {
        let mut connection = connect(&broker, "filler").await;
        let mut session = begin_session(&mut connection).await;
        let mut tx = attach_sender(&mut session, "fill", "full").await;
        send_text(&mut tx, "fills the queue").await;
        step("close tx", tx.close()).await.unwrap();
        step("end", session.end()).await.unwrap();
        step("close", connection.close()).await.unwrap();
    }
    assert_eq!(depth(&broker, "full"), Some((1, 0, 0)));

    let mut raw = opened(&broker).await;
    let (_, flow) = raw.attach_publisher(0, 0, "full").await;
    assert!(
        flow.as_ref().and_then(|f| f.link_credit).unwrap_or(0) == 0,
        "no credit for a full queue: {flow:?}"
    );
    raw.send_with_payload(
        0,
        Performative::Transfer(transfer(0, 0, false)),
        &text_message("uninvited"),
    )
    .await;
    raw.expect_close_with(condition::TRANSFER_LIMIT_EXCEEDED)
        .await;
    raw.expect_eof().await;
    assert_eq!(depth(&broker, "full"), Some((1, 0, 0)), "nothing was added");
    others_unaffected(&broker, &mut bystander, "after-no-credit").await;
    bystander.close().await;
    stop(broker).await;
}

/// A session error ends that session (with the error in `end`), not the
/// connection: the same connection can begin a session again and publish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_or_transfer_on_an_unknown_handle_ends_the_session_with_unattached_handle() {
    let broker = start().await;
    let mut bystander = Bystander::connect(&broker, "unknown-handle").await;

    // A flow for handle 7, never attached.
    let mut raw = opened(&broker).await;
    raw.send(0, Performative::Flow(credit_flow(7, 0, 10, false)))
        .await;
    raw.expect_end_with(0, condition::UNATTACHED_HANDLE).await;
    // Frames the client sent before it saw the `end` are dropped, then
    // the client answers with its own `end`.
    raw.send(0, Performative::Flow(credit_flow(7, 0, 10, false)))
        .await;
    raw.send(0, Performative::End(End::default())).await;
    // The connection goes on: a new session on the same channel works.
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "unknown-handle-q").await;
    let disposition = raw
        .publish(0, 0, 0, &text_message("after the session error"))
        .await;
    assert!(
        matches!(disposition.state, Some(DeliveryState::Accepted)),
        "publish after the session error: {disposition:?}"
    );

    // A transfer on handle 7, while handle 0 is attached: the session
    // ends, and its other link goes with it.
    let mut raw = opened(&broker).await;
    raw.attach_publisher(0, 0, "unknown-handle-q").await;
    raw.send_with_payload(
        0,
        Performative::Transfer(transfer(7, 0, false)),
        &text_message("nowhere"),
    )
    .await;
    raw.expect_end_with(0, condition::UNATTACHED_HANDLE).await;
    raw.send(0, Performative::End(End::default())).await;
    raw.send(0, Performative::Close(Close::default())).await;
    raw.expect_close().await;
    raw.expect_eof().await;

    // A flow that names an attached handle is fine (control case).
    let mut raw = opened(&broker).await;
    raw.attach_consumer(0, 0, "unknown-handle-q").await;
    raw.send(
        0,
        Performative::Flow(Flow {
            echo: true,
            ..credit_flow(0, 0, 1, false)
        }),
    )
    .await;
    match raw.performative().await {
        (_, Performative::Flow(f), _) => assert_eq!(f.handle, Some(0)),
        other => panic!("expected the echoed flow, got {other:?}"),
    }
    drop(raw);

    others_unaffected(&broker, &mut bystander, "after-unknown-handle").await;
    bystander.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_are_dropped() {
    let broker = start_with(|c| c.limits.handshake_timeout_ms = 300).await;
    let mut bystander = Bystander::connect(&broker, "stalled").await;

    // Half a protocol header, then silence.
    let started = Instant::now();
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.write(b"AMQP").await;
    raw.expect_eof_within(Duration::from_secs(2)).await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "dropped by the time-out, not at once: {:?}",
        started.elapsed()
    );

    // Stalled inside SASL: header exchanged, no sasl-init.
    let started = Instant::now();
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.sasl_start().await;
    raw.expect_eof_within(Duration::from_secs(2)).await;
    assert!(started.elapsed() >= Duration::from_millis(250));

    // AMQP header, but no open: the broker says why, then closes.
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.write(&AMQP_HEADER).await;
    assert_eq!(raw.read_bytes(8).await, AMQP_HEADER);
    within(
        Duration::from_secs(2),
        "close after a missing open",
        raw.expect_close_with(condition::RESOURCE_LIMIT_EXCEEDED),
    )
    .await;
    raw.expect_eof_within(Duration::from_secs(2)).await;

    // Connected before and idle for longer than the handshake time-out:
    // the time-out applies to handshakes only.
    others_unaffected(&broker, &mut bystander, "after-stalled").await;
    bystander.close().await;
    stop(broker).await;
}
