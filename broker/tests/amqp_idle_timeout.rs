//! Guards idle time-outs in both directions: a client that announces an
//! idle-time-out gets frames (heartbeats) from the broker often enough to
//! stay open while it has nothing to say (checked on the wire and with
//! fe2o3, which drops a connection whose peer goes quiet); and a broker
//! with `limits.idle_timeout_ms` closes a silent client with
//! amqp:resource-limit-exceeded while keeping one that heartbeats.

use crate::common;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::*;
use fe2o3_amqp::Connection;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::frame::encode_empty_frame;
use ramqpd_broker::codec::{Frame, FrameBody};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_heartbeats_a_client_that_asks_for_it() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let mut ours = open("wants-heartbeats");
    ours.idle_time_out = Some(1000);
    raw.open_with(ours).await;

    // Silent for 3 s; record when the broker's frames arrive.
    let started = Instant::now();
    let mut last = started;
    let mut longest_gap = Duration::ZERO;
    let mut heartbeats = 0;
    while started.elapsed() < Duration::from_secs(3) {
        match raw.read_within(Duration::from_millis(1500)).await {
            Read::Frame(Frame {
                body: FrameBody::Empty,
                channel,
            }) => {
                assert_eq!(channel, 0);
                heartbeats += 1;
                longest_gap = longest_gap.max(last.elapsed());
                last = Instant::now();
            }
            Read::Frame(other) => panic!("unexpected frame while idle: {other:?}"),
            Read::Eof => panic!("the broker closed an idle connection that asked for heartbeats"),
        }
    }
    assert!(heartbeats >= 4, "only {heartbeats} heartbeats in 3 s");
    assert!(
        longest_gap < Duration::from_millis(1000),
        "{longest_gap:?} without a frame exceeds our idle-time-out"
    );
    // Still open: a session begins.
    raw.begin(0).await;
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_with_idle_timeout_stays_open_while_idle() {
    let broker = start().await;
    let mut connection = step(
        "open with idle-time-out 1000 ms",
        Connection::builder()
            .container_id("idle-fe2o3")
            .idle_time_out(1000u32)
            .open(broker.url().as_str()),
    )
    .await
    .expect("connection opens");
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "idle").await;
    let mut rx = attach_receiver(&mut session, "rx", "idle", 1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !connection.is_closed(),
        "fe2o3 dropped the connection as idle"
    );
    send_text(&mut tx, "after 3 s of silence").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "after 3 s of silence");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_client_is_closed_with_resource_limit_exceeded() {
    let broker = start_with(|c| c.limits.idle_timeout_ms = 500).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    let theirs = raw.open().await;
    assert_eq!(
        theirs.idle_time_out,
        Some(250),
        "the broker announces half its time-out (transport 2.4.5)"
    );
    raw.begin(0).await;
    let silent_since = Instant::now();
    within(
        Duration::from_secs(3),
        "close of a silent connection",
        raw.expect_close_with(condition::RESOURCE_LIMIT_EXCEEDED),
    )
    .await;
    let waited = silent_since.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_millis(2000),
        "closed after {waited:?} of silence (time-out 500 ms)"
    );
    raw.expect_eof_within(Duration::from_secs(3)).await;
    assert_serves(&broker, "after-idle").await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeating_client_is_kept_open() {
    let broker = start_with(|c| c.limits.idle_timeout_ms = 500).await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    let mut heartbeat = BytesMut::new();
    encode_empty_frame(&mut heartbeat);
    // 1.5 s, three times the broker's time-out, sending only heartbeats.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        raw.write(&heartbeat).await;
        if let Ok(read) =
            tokio::time::timeout(Duration::from_millis(150), raw.read_within(STEP)).await
        {
            panic!("unexpected from the broker while heartbeating: {read:?}");
        }
    }
    raw.begin(0).await;
    drop(raw);
    stop(broker).await;
}
