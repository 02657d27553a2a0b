//! Unit tests of the transient queue through the [`Queue`] trait: FIFO,
//! credit, drain, competing consumers, outcomes, requeue order, capacity.

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;

use super::*;

fn queue(max_messages: usize) -> TransientQueue {
    TransientQueue::new(
        QueueAddress::parse("/queues/t").unwrap(),
        max_messages,
        u64::MAX,
    )
}

fn message(body: &'static [u8]) -> Message {
    Message {
        bytes: Bytes::from_static(body),
        header: None,
        header_len: 0,
    }
}

/// Everything queued on the sink so far.
fn events(rx: &mut UnboundedReceiver<QueueEvent>) -> Vec<QueueEvent> {
    let mut all = Vec::new();
    while let Ok(event) = rx.try_recv() {
        all.push(event);
    }
    all
}

fn delivered(events: &[QueueEvent]) -> Vec<(u64, &[u8], u32)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            QueueEventKind::Deliver(d) => Some((e.tag, &d.message.bytes[..], d.delivery_count)),
            _ => None,
        })
        .collect()
}

fn delivery_ids(events: &[QueueEvent]) -> Vec<MessageId> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            QueueEventKind::Deliver(d) => Some(d.id),
            _ => None,
        })
        .collect()
}

#[test]
fn fifo_within_credit() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    for body in [&b"a"[..], b"b", b"c"] {
        assert_eq!(
            q.publish(message(body), None).unwrap(),
            PublishStatus::Accepted
        );
    }
    let c = q.subscribe(sink, 7, ConsumerOptions::default()).unwrap();
    assert!(events(&mut rx).is_empty(), "no credit, no delivery");
    q.flow(c, 2, false);
    let got = events(&mut rx);
    assert_eq!(delivered(&got), vec![(7, &b"a"[..], 0), (7, &b"b"[..], 0)]);
    q.flow(c, 10, false);
    assert_eq!(delivered(&events(&mut rx)), vec![(7, &b"c"[..], 0)]);
    // Credit left: the next publish goes straight out.
    q.publish(message(b"d"), None).unwrap();
    assert_eq!(delivered(&events(&mut rx)), vec![(7, &b"d"[..], 0)]);
    assert_eq!(q.stats().unsettled, 4);
}

#[test]
fn drain_uses_up_credit_and_reports() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    q.publish(message(b"a"), None).unwrap();
    let c = q.subscribe(sink, 1, ConsumerOptions::default()).unwrap();
    q.flow(c, 5, true);
    let got = events(&mut rx);
    assert_eq!(delivered(&got).len(), 1);
    assert!(matches!(
        got.last().unwrap().kind,
        QueueEventKind::Drained { credit_limit: 5 }
    ));
    // The credit is gone: a new message waits for new credit.
    q.publish(message(b"b"), None).unwrap();
    assert!(events(&mut rx).is_empty());
    q.flow(c, 6, false);
    assert_eq!(delivered(&events(&mut rx)), vec![(1, &b"b"[..], 0)]);
}

#[test]
fn competing_consumers_round_robin() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    let a = q
        .subscribe(sink.clone(), 1, ConsumerOptions::default())
        .unwrap();
    let b = q.subscribe(sink, 2, ConsumerOptions::default()).unwrap();
    q.flow(a, 10, false);
    q.flow(b, 10, false);
    for _ in 0..6 {
        q.publish(message(b"m"), None).unwrap();
    }
    let tags: Vec<u64> = delivered(&events(&mut rx)).iter().map(|d| d.0).collect();
    assert_eq!(tags, vec![1, 2, 1, 2, 1, 2]);
}

#[test]
fn outcomes() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    let c = q.subscribe(sink, 1, ConsumerOptions::default()).unwrap();
    q.publish(message(b"x"), None).unwrap();
    q.flow(c, 1, false);
    let id = delivery_ids(&events(&mut rx))[0];
    q.settle(c, id, Outcome::Released);
    q.flow(c, 2, false);
    let again = events(&mut rx);
    assert_eq!(
        delivered(&again),
        vec![(1, &b"x"[..], 0)],
        "released: count unchanged"
    );
    let id = delivery_ids(&again)[0];
    q.settle(
        c,
        id,
        Outcome::Modified {
            delivery_failed: true,
            undeliverable_here: false,
        },
    );
    q.flow(c, 3, false);
    let again = events(&mut rx);
    assert_eq!(
        delivered(&again),
        vec![(1, &b"x"[..], 1)],
        "delivery-failed: count + 1"
    );
    q.settle(c, delivery_ids(&again)[0], Outcome::Rejected);
    let stats = q.stats();
    assert_eq!((stats.ready, stats.unsettled), (0, 0));
}

#[test]
fn undeliverable_here_skips_that_consumer() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    let a = q
        .subscribe(sink.clone(), 1, ConsumerOptions::default())
        .unwrap();
    q.publish(message(b"x"), None).unwrap();
    q.flow(a, 1, false);
    let id = delivery_ids(&events(&mut rx))[0];
    q.settle(
        a,
        id,
        Outcome::Modified {
            delivery_failed: false,
            undeliverable_here: true,
        },
    );
    q.flow(a, 5, false);
    assert!(
        delivered(&events(&mut rx)).is_empty(),
        "not to the same consumer"
    );
    let b = q.subscribe(sink, 2, ConsumerOptions::default()).unwrap();
    q.flow(b, 1, false);
    assert_eq!(delivered(&events(&mut rx)), vec![(2, &b"x"[..], 0)]);
}

#[test]
fn unsubscribe_returns_unsettled_in_order() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    for body in [&b"1"[..], b"2", b"3", b"4"] {
        q.publish(message(body), None).unwrap();
    }
    let a = q
        .subscribe(sink.clone(), 1, ConsumerOptions::default())
        .unwrap();
    q.flow(a, 3, false);
    let ids = delivery_ids(&events(&mut rx));
    q.settle(a, ids[1], Outcome::Accepted);
    q.unsubscribe(a);
    let b = q.subscribe(sink, 2, ConsumerOptions::default()).unwrap();
    q.flow(b, 10, false);
    let got = events(&mut rx);
    let bodies: Vec<&[u8]> = delivered(&got).iter().map(|d| d.1).collect();
    assert_eq!(bodies, vec![&b"1"[..], b"3", b"4"]);
}

#[test]
fn capacity_wakes_publishers() {
    let q = queue(2);
    let (sink, mut rx) = Sink::channel();
    q.publish(message(b"1"), None).unwrap();
    assert!(q.has_capacity(&sink, 9));
    q.publish(message(b"2"), None).unwrap();
    assert!(!q.has_capacity(&sink, 9), "full at max_messages");
    let c = q
        .subscribe(sink.clone(), 1, ConsumerOptions::default())
        .unwrap();
    q.flow(c, 1, false);
    let id = delivery_ids(&events(&mut rx))[0];
    assert!(
        !q.has_capacity(&sink, 9),
        "an unsettled message still counts"
    );
    q.settle(c, id, Outcome::Accepted);
    let woken: Vec<u64> = events(&mut rx)
        .iter()
        .filter(|e| matches!(e.kind, QueueEventKind::Capacity))
        .map(|e| e.tag)
        .collect();
    assert_eq!(woken, vec![9], "one wake-up, even though asked twice");
}

#[test]
fn vanished_connection_returns_messages() {
    let q = queue(100);
    let (sink, rx) = Sink::channel();
    let c = q.subscribe(sink, 1, ConsumerOptions::default()).unwrap();
    drop(rx);
    q.publish(message(b"x"), None).unwrap();
    q.flow(c, 1, false);
    let stats = q.stats();
    assert_eq!((stats.ready, stats.consumers), (1, 0));
}

#[test]
fn purge_drops_waiting_messages_and_keeps_those_out() {
    let q = queue(3);
    let (sink, mut rx) = Sink::channel();
    for body in [&b"a"[..], b"b", b"c"] {
        q.publish(message(body), None).unwrap();
    }
    assert!(!q.has_capacity(&sink, 9), "full at 3");
    let consumer = q
        .subscribe(sink.clone(), 1, ConsumerOptions::default())
        .unwrap();
    q.flow(consumer, 1, false);
    let out = delivery_ids(&events(&mut rx));
    assert_eq!(out.len(), 1);
    assert_eq!(q.purge(), 2, "the two waiting messages");
    let stats = q.stats();
    assert_eq!((stats.ready, stats.unsettled), (0, 1));
    // Room again: the waiting publisher is woken.
    assert!(events(&mut rx)
        .iter()
        .any(|e| e.tag == 9 && matches!(e.kind, QueueEventKind::Capacity)));
    // The message out with the consumer is still its to settle.
    q.settle(consumer, out[0], Outcome::Released);
    q.flow(consumer, 2, false);
    assert_eq!(delivered(&events(&mut rx)), vec![(1, &b"a"[..], 0)]);
}

#[test]
fn delete_closes_consumers_and_refuses_what_follows() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    q.publish(message(b"a"), None).unwrap();
    let consumer = q
        .subscribe(sink.clone(), 4, ConsumerOptions::default())
        .unwrap();
    q.flow(consumer, 10, false);
    q.delete();
    let closed: Vec<_> = events(&mut rx)
        .into_iter()
        .filter_map(|e| match e.kind {
            QueueEventKind::Closed { condition, .. } => Some((e.tag, condition)),
            _ => None,
        })
        .collect();
    assert_eq!(closed, vec![(4, "amqp:resource-deleted")]);
    assert!(matches!(
        q.publish(message(b"b"), None),
        Err(QueueError::Gone(_))
    ));
    assert!(matches!(
        q.subscribe(sink, 5, ConsumerOptions::default()),
        Err(QueueError::Gone(_))
    ));
    let stats = q.stats();
    assert_eq!((stats.ready, stats.unsettled, stats.consumers), (0, 0, 0));
}

#[test]
fn the_memory_alarm_holds_publishers_back_and_its_clearing_wakes_them() {
    use super::resource_alarm::AlarmState;
    let alarm = std::sync::Arc::new(ResourceAlarm::default());
    let q = queue(10).with_alarm(alarm.clone());
    let (sink, mut rx) = Sink::channel();
    // A disk limit alone does not concern an in-memory queue.
    alarm.set(AlarmState::disk("disk short"));
    assert!(q.has_capacity(&sink, 4));
    alarm.set(AlarmState::memory("memory high"));
    assert!(!q.has_capacity(&sink, 4), "no credit while memory is high");
    assert!(events(&mut rx).is_empty());
    alarm.set(AlarmState::disk("disk short"));
    let woken = events(&mut rx);
    assert!(
        woken
            .iter()
            .any(|e| e.tag == 4 && matches!(e.kind, QueueEventKind::Capacity)),
        "{woken:?}"
    );
    assert!(q.has_capacity(&sink, 4));
}

/// A message whose application properties say `colour`, body `body`.
fn coloured(colour: &str, body: &str) -> Message {
    use crate::codec::{Descriptor, Value};
    let mut out = bytes::BytesMut::new();
    for (code, value) in [
        (
            0x74,
            Value::Map(vec![(
                Value::String("colour".into()),
                Value::String(colour.into()),
            )]),
        ),
        (0x77, Value::String(body.into())),
    ] {
        Value::Described(Box::new((Descriptor::Code(code), value))).encode(&mut out);
    }
    Message {
        bytes: out.freeze(),
        header: None,
        header_len: 0,
    }
}

#[test]
fn a_filtered_consumer_takes_only_matches_and_leaves_the_rest_in_order() {
    let q = queue(100);
    let (sink, mut rx) = Sink::channel();
    let set = vec![filter::selector_entry("s", "colour = 'red'")];
    let red = ConsumerOptions {
        filter: filter::MessageFilter::from_filter_set(&set)
            .unwrap()
            .map(std::sync::Arc::new),
        ..ConsumerOptions::default()
    };
    let picky = q.subscribe(sink.clone(), 1, red).unwrap();
    q.flow(picky, 10, false);
    let sent = [("blue", "b1"), ("red", "r1"), ("blue", "b2"), ("red", "r2")];
    for (colour, body) in sent {
        q.publish(coloured(colour, body), None).unwrap();
    }
    let ids = delivery_ids(&events(&mut rx));
    assert_eq!(ids.len(), 2, "only the red ones: {ids:?}");
    // The blue ones wait, in order, for anyone else.
    let any = q.subscribe(sink, 2, ConsumerOptions::default()).unwrap();
    q.flow(any, 10, false);
    let got = events(&mut rx);
    let bodies: Vec<&[u8]> = delivered(&got).iter().map(|(_, b, _)| *b).collect();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].ends_with(b"b1") && bodies[1].ends_with(b"b2"));
    // A red one released by the picky consumer goes back to it.
    q.settle(picky, ids[0], Outcome::Released);
    assert_eq!(delivery_ids(&events(&mut rx)), vec![ids[0]]);
}
