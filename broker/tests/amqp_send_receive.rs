//! Guards the basic publish/consume paths against a real third-party AMQP
//! 1.0 client (fe2o3-amqp) over real sockets: unsettled publishes get
//! `accepted`, pre-settled publishes are delivered, at-most-once consumers
//! get settled deliveries the broker forgets, FIFO order holds over 1,000
//! messages, message content (every section, byte for byte) is unchanged by
//! the broker, and one connection can carry many sessions, links and queues.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::SenderSettleMode;
use fe2o3_amqp::types::messaging::{
    ApplicationProperties, Body, Footer, Header, Message, MessageAnnotations, Properties,
};
use fe2o3_amqp::types::primitives::{
    Binary, OrderedMap, SimpleValue, Symbol, Timestamp, Value as FeValue,
};
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::codec::{DeliveryState, Disposition, Performative, Role, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsettled_send_is_accepted_and_queued() {
    let broker = start().await;
    let mut connection = connect(&broker, "accepted").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "accepted").await;

    for i in 0..3 {
        send_text(&mut tx, &format!("m{i}")).await;
    }
    // The outcome means the queue holds the messages.
    assert_eq!(depth(&broker, "accepted"), Some((3, 0, 0)));

    let mut rx = attach_receiver(&mut session, "rx", "accepted", 10).await;
    for i in 0..3 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("m{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    eventually(Duration::from_secs(5), "queue empty after accepts", || {
        depth(&broker, "accepted") == Some((0, 0, 1))
    })
    .await;

    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presettled_send_is_delivered() {
    let broker = start().await;
    let mut connection = connect(&broker, "presettled").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = step(
        "settled sender attach",
        Sender::builder()
            .name("settled-tx")
            .target("/queues/presettled")
            .sender_settle_mode(SenderSettleMode::Settled)
            .attach(&mut session),
    )
    .await
    .expect("settled sender attaches");

    for i in 0..20 {
        // A settled send completes without waiting for a disposition.
        step("settled send", tx.send(format!("s{i}")))
            .await
            .expect("settled send");
    }
    eventually(
        Duration::from_secs(5),
        "20 pre-settled messages queued",
        || depth(&broker, "presettled") == Some((20, 0, 0)),
    )
    .await;

    let mut rx = attach_receiver(&mut session, "rx", "presettled", 50).await;
    for i in 0..20 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("s{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    expect_nothing(&mut rx, Duration::from_millis(200), "only 20 were sent").await;

    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_once_receiver_gets_settled_deliveries() {
    let broker = start().await;
    let mut connection = connect(&broker, "amo").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "amo").await;
    for i in 0..5 {
        send_text(&mut tx, &format!("a{i}")).await;
    }

    let mut rx = step(
        "at-most-once receiver attach",
        Receiver::builder()
            .name("amo-rx")
            .source("/queues/amo")
            .sender_settle_mode(SenderSettleMode::Settled)
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .expect("receiver attaches");
    step("credit", rx.set_credit(10)).await.unwrap();
    for i in 0..5 {
        let (_delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("a{i}"));
    }
    // Never disposed: the broker forgot them once sent (settled).
    eventually(
        Duration::from_secs(5),
        "nothing held after settled sends",
        || depth(&broker, "amo") == Some((0, 0, 1)),
    )
    .await;

    // Going away without settling returns nothing: they were settled.
    step("close", connection.close()).await.unwrap();
    eventually(Duration::from_secs(5), "consumer gone", || {
        depth(&broker, "amo") == Some((0, 0, 0))
    })
    .await;
    let mut connection = connect(&broker, "amo-2").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx2", "amo", 10).await;
    expect_nothing(
        &mut rx,
        Duration::from_millis(300),
        "settled deliveries are not redelivered",
    )
    .await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_order_of_1000_messages() {
    const N: usize = 1000;
    let broker = start().await;
    let mut connection = connect(&broker, "fifo").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "fifo").await;

    let mut pending = Vec::with_capacity(N);
    for i in 0..N {
        let fut = step("batchable send", tx.send_batchable(format!("{i:04}")))
            .await
            .expect("transfer sent");
        pending.push(fut);
    }
    for fut in pending {
        let outcome = step("outcome", fut).await.expect("outcome");
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    assert_eq!(depth(&broker, "fifo"), Some((N, 0, 0)));

    let mut rx = attach_receiver(&mut session, "rx", "fifo", 300).await;
    let mut batch = Vec::new();
    for i in 0..N {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("{i:04}"), "message {i} out of order");
        batch.push(delivery);
        if batch.len() == 100 {
            step("accept batch", rx.accept_all(batch.drain(..)))
                .await
                .unwrap();
            step("more credit", rx.set_credit(300)).await.unwrap();
        }
    }
    expect_nothing(&mut rx, Duration::from_millis(200), "exactly N were sent").await;
    eventually(Duration::from_secs(5), "queue drained", || {
        depth(&broker, "fifo") == Some((0, 0, 1))
    })
    .await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

fn rich_message(i: u32) -> Message<Body<FeValue>> {
    let mut nested = OrderedMap::new();
    nested.insert(
        FeValue::from("k"),
        FeValue::List(vec![FeValue::Int(-7), FeValue::Bool(true)]),
    );
    nested.insert(FeValue::Uint(9), FeValue::Double(2.5.into()));
    Message::builder()
        .header(
            Header::builder()
                .durable(true)
                .priority(7)
                .first_acquirer(false)
                .build(),
        )
        .message_annotations(
            MessageAnnotations::builder()
                .insert(
                    Symbol::from("x-opt-trace"),
                    FeValue::String(format!("t{i}")),
                )
                .insert(Symbol::from("x-opt-n"), FeValue::Long(-42))
                .build(),
        )
        .properties(
            Properties::builder()
                .message_id(format!("msg-{i}"))
                .to("/queues/somewhere")
                .subject("round trip")
                .reply_to("/queues/replies")
                .correlation_id(u64::from(i) + 1_000_000)
                .content_type(Symbol::from("application/x-test"))
                .content_encoding(Symbol::from("identity"))
                .absolute_expiry_time(Some(Timestamp::from_milliseconds(4_102_444_800_000)))
                .creation_time(Some(Timestamp::from_milliseconds(1_700_000_000_123)))
                .group_id(Some("group-a".to_string()))
                .group_sequence(Some(i))
                .reply_to_group_id(Some("group-b".to_string()))
                .build(),
        )
        .application_properties(
            ApplicationProperties::builder()
                .insert("string", SimpleValue::String("héllo ✓".into()))
                .insert("int", SimpleValue::Int(-123_456))
                .insert("ulong", SimpleValue::Ulong(u64::MAX))
                .insert("bool", SimpleValue::Bool(false))
                .insert("double", SimpleValue::Double(3.25.into()))
                .insert(
                    "binary",
                    SimpleValue::Binary(Binary::from(vec![0u8, 1, 2, 255])),
                )
                .insert("symbol", SimpleValue::Symbol(Symbol::from("sym")))
                .insert("null", SimpleValue::Null)
                .build(),
        )
        .footer(
            Footer::builder()
                .insert(Symbol::from("x-checksum"), FeValue::Uint(0xdead_beef))
                .build(),
        )
        .body(Body::Value(fe2o3_amqp::types::messaging::AmqpValue(
            FeValue::Map(nested),
        )))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_section_round_trips_unchanged() {
    let broker = start().await;
    let mut connection = connect(&broker, "sections").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "sections").await;
    let mut rx = attach_receiver(&mut session, "rx", "sections", 10).await;

    for i in 0..3 {
        let sent = rich_message(i);
        let outcome = step("send rich message", tx.send(sent.clone()))
            .await
            .expect("send");
        assert!(outcome.is_accepted(), "{outcome:?}");
        let delivery = recv(&mut rx).await;
        assert_eq!(delivery.message(), &sent, "message {i} changed in transit");
        step("accept", rx.accept(&delivery)).await.unwrap();
    }

    // Data bodies, including several data sections and an empty one.
    let data = Message::builder()
        .properties(Properties::builder().message_id(77u64).build())
        .body(Body::<FeValue>::Data(
            vec![
                fe2o3_amqp::types::messaging::Data(Binary::from((0..=255u8).collect::<Vec<_>>())),
                fe2o3_amqp::types::messaging::Data(Binary::from(Vec::new())),
                fe2o3_amqp::types::messaging::Data(Binary::from(vec![7u8; 3000])),
            ]
            .into(),
        ))
        .build();
    let outcome = step("send data message", tx.send(data.clone()))
        .await
        .unwrap();
    assert!(outcome.is_accepted(), "{outcome:?}");
    let delivery = recv(&mut rx).await;
    assert_eq!(delivery.message(), &data);
    step("accept", rx.accept(&delivery)).await.unwrap();

    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

// --- byte-exact forwarding, checked with raw frames --------------------------

/// list32 / map32 with the given element bytes (a non-minimal encoding a
/// re-encoding broker would shrink).
fn compound32(code: u8, count: u32, elements: &[u8]) -> Vec<u8> {
    let mut out = vec![code];
    out.extend_from_slice(&(elements.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(elements);
    out
}

fn str32(code: u8, text: &str) -> Vec<u8> {
    let mut out = vec![code];
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// A message whose every section uses unusual but valid encodings.
fn odd_message() -> Vec<u8> {
    let mut m = Vec::new();
    // header: smallulong descriptor, list8: durable=true, priority=ubyte 7
    m.extend_from_slice(&[0x00, 0x53, 0x70, 0xc0, 0x04, 0x02, 0x41, 0x50, 0x07]);
    // message-annotations: full ulong descriptor, map32 { sym32: str32 }
    m.extend_from_slice(&[0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x72]);
    let mut kv = str32(0xb3, "x-opt-odd");
    kv.extend(str32(0xb1, "v"));
    m.extend(compound32(0xd1, 2, &kv));
    // properties: list32 [message-id str32, user-id null, to str8]
    m.extend_from_slice(&[0x00, 0x53, 0x73]);
    let mut fields = str32(0xb1, "id-1");
    fields.push(0x40);
    fields.extend_from_slice(&[0xa1, 0x02, b'/', b'x']);
    m.extend(compound32(0xd0, 3, &fields));
    // application-properties: map8 { str8 "k": vbin32 [1,2,3] , "i": int 0x54 small }
    m.extend_from_slice(&[0x00, 0x53, 0x74]);
    let mut kv = vec![0xa1, 0x01, b'k', 0xb0, 0, 0, 0, 3, 1, 2, 3];
    kv.extend_from_slice(&[0xa1, 0x01, b'i', 0x71, 0, 0, 0, 5]);
    let mut map8 = vec![0xc1, (kv.len() + 1) as u8, 4];
    map8.extend(kv);
    m.extend(map8);
    // data: vbin32 holding 300 bytes
    m.extend_from_slice(&[0x00, 0x53, 0x75, 0xb0, 0, 0, 0x01, 0x2c]);
    m.extend((0..300u32).map(|i| (i * 7) as u8));
    // a second data section, vbin8, empty
    m.extend_from_slice(&[0x00, 0x53, 0x75, 0xa0, 0x00]);
    // footer: empty map32
    m.extend_from_slice(&[0x00, 0x53, 0x78]);
    m.extend(compound32(0xd1, 0, &[]));
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_bytes_are_forwarded_verbatim() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let (_, flow) = raw.attach_publisher(0, 0, "verbatim").await;
    assert!(
        flow.and_then(|f| f.link_credit).unwrap_or(0) > 0,
        "publisher gets credit"
    );
    let messages = [
        odd_message(),
        text_message("plain"),
        // No header at all, a body of a single amqp-value (binary).
        encode(&[section(
            0x77,
            Value::Binary(bytes::Bytes::from(vec![9u8; 100])),
        )]),
    ];
    for (i, message) in messages.iter().enumerate() {
        let disposition = raw.publish(0, 0, i as u32, message).await;
        assert_eq!(disposition.first, i as u32);
        assert!(disposition.settled);
        assert_eq!(disposition.state, Some(DeliveryState::Accepted));
    }

    raw.attach_consumer(0, 1, "verbatim").await;
    raw.send(0, Performative::Flow(credit_flow(1, 0, 10, false)))
        .await;
    for (i, message) in messages.iter().enumerate() {
        let delivery = raw.delivery().await;
        assert_eq!(delivery.first.handle, 1);
        assert_eq!(
            &delivery.payload, message,
            "message {i} must reach the consumer byte for byte"
        );
        raw.send(
            0,
            Performative::Disposition(Disposition {
                role: Role::Receiver,
                first: delivery.first.delivery_id.unwrap(),
                last: None,
                settled: true,
                state: Some(DeliveryState::Accepted),
                batchable: false,
            }),
        )
        .await;
    }
    eventually(Duration::from_secs(5), "all settled", || {
        depth(&broker, "verbatim") == Some((0, 0, 1))
    })
    .await;
    drop(raw);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_and_links_on_one_connection() {
    const SESSIONS: usize = 6;
    const LINKS: usize = 3;
    let broker = start().await;
    let mut connection = connect(&broker, "many").await;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(begin_session(&mut connection).await);
    }
    let mut links = Vec::new();
    for (s, sess) in sessions.iter_mut().enumerate() {
        for l in 0..LINKS {
            let queue = format!("many-{s}-{l}");
            let tx = attach_sender(sess, &format!("tx-{s}-{l}"), &queue).await;
            let rx = attach_receiver(sess, &format!("rx-{s}-{l}"), &queue, 10).await;
            links.push((queue, tx, rx));
        }
    }
    // Interleave: every link sends before any receives.
    for round in 0..3 {
        for (queue, tx, _) in links.iter_mut() {
            send_text(tx, &format!("{queue}#{round}")).await;
        }
    }
    for (queue, _, rx) in links.iter_mut() {
        for round in 0..3 {
            let (delivery, text) = recv_text(rx).await;
            assert_eq!(text, format!("{queue}#{round}"));
            step("accept", rx.accept(&delivery)).await.unwrap();
        }
    }
    assert_eq!(broker.queues().len(), SESSIONS * LINKS);
    for (_, tx, rx) in links {
        step("close tx", tx.close()).await.unwrap();
        step("close rx", rx.close()).await.unwrap();
    }
    for mut sess in sessions {
        step("end", sess.end()).await.unwrap();
    }
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_queues_at_once_stay_separate() {
    const QUEUES: usize = 4;
    const PER_QUEUE: usize = 20;
    let broker = start().await;
    let mut connection = connect(&broker, "queues").await;
    let mut session = begin_session(&mut connection).await;
    let mut senders = Vec::new();
    for q in 0..QUEUES {
        senders.push(attach_sender(&mut session, &format!("tx{q}"), &format!("multi-{q}")).await);
    }
    for i in 0..PER_QUEUE {
        for (q, tx) in senders.iter_mut().enumerate() {
            send_text(tx, &format!("q{q}-{i}")).await;
        }
    }
    let stats = broker.queues();
    let addresses: Vec<&str> = stats.iter().map(|s| s.address.as_str()).collect();
    assert_eq!(
        addresses,
        (0..QUEUES)
            .map(|q| format!("/queues/multi-{q}"))
            .collect::<Vec<_>>()
    );
    assert!(stats.iter().all(|s| s.ready == PER_QUEUE), "{stats:?}");

    // Consume the queues in reverse order: each holds only its own messages.
    for q in (0..QUEUES).rev() {
        let mut rx =
            attach_receiver(&mut session, &format!("rx{q}"), &format!("multi-{q}"), 50).await;
        for i in 0..PER_QUEUE {
            let (delivery, text) = recv_text(&mut rx).await;
            assert_eq!(text, format!("q{q}-{i}"));
            step("accept", rx.accept(&delivery)).await.unwrap();
        }
        expect_nothing(
            &mut rx,
            Duration::from_millis(100),
            "queue holds only its own",
        )
        .await;
        step("close rx", rx.close()).await.unwrap();
    }
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}
