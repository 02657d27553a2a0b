//! Unit tests of `dead_letter.rs`: the annotations RabbitMQ writes, the
//! untouched rest of the message, and no panic on any input.

use bytes::{BufMut, Bytes, BytesMut};

use super::*;
use crate::codec::sections;

fn section(out: &mut BytesMut, code: u64, value: &Value) {
    out.put_slice(&[fc::DESCRIBED, fc::SMALLULONG, code as u8]);
    value.encode(out);
}

fn sym(s: &str) -> Value {
    Value::Symbol(s.into())
}

/// header (durable, ttl, delivery-count 3), delivery-annotations,
/// message-annotations (one entry), properties (message-id), a data body.
fn message() -> (Bytes, Bytes) {
    let mut out = BytesMut::new();
    Header {
        durable: true,
        priority: 7,
        ttl: Some(5000),
        first_acquirer: true,
        delivery_count: 3,
    }
    .encode(&mut out);
    section(
        &mut out,
        dc::DELIVERY_ANNOTATIONS,
        &Value::Map(vec![(sym("x-hop"), Value::Uint(1))]),
    );
    section(
        &mut out,
        dc::MESSAGE_ANNOTATIONS,
        &Value::Map(vec![(sym("x-app"), Value::String("kept".into()))]),
    );
    let bare_start = out.len();
    section(
        &mut out,
        dc::PROPERTIES,
        &Value::List(vec![Value::String("id-1".into())]),
    );
    section(
        &mut out,
        dc::DATA,
        &Value::Binary(Bytes::from_static(b"body")),
    );
    let bytes = out.freeze();
    let bare = bytes.slice(bare_start..);
    (bytes, bare)
}

fn death<'a>(queue: &'a str, reason: DeathReason, time_ms: i64) -> Death<'a> {
    Death {
        queue,
        reason,
        time_ms,
        target: "/queues/dlq",
        key: None,
    }
}

fn annotations(message: &Bytes) -> Vec<(Value, Value)> {
    let leading = leading_sections(message).expect("sections");
    leading.annotations.expect("message annotations")
}

fn records(message: &Bytes) -> Vec<Vec<(Value, Value)>> {
    death_records(field(&annotations(message), DEATHS))
}

#[test]
fn first_death_records_rabbitmq_annotations_and_keeps_the_bare_message() {
    let (original, bare) = message();
    let out = record_death(&original, &death("/quorum/q", DeathReason::Rejected, 1000))
        .expect("dead-lettered");
    assert!(!out.cycle);
    assert!(out.bytes.ends_with(&bare), "bare message untouched");
    let view = MessageView::scan(&out.bytes).expect("valid message");
    let header = view.header.expect("header kept");
    assert!(header.durable);
    assert_eq!(header.priority, 7);
    assert_eq!(header.ttl, None, "ttl moves into the death record");
    assert_eq!(header.delivery_count, 0, "counted again in the next queue");
    let map = annotations(&out.bytes);
    assert!(
        field(&map, "x-hop").is_none(),
        "delivery-annotations dropped"
    );
    assert_eq!(field(&map, "x-app"), Some(&Value::String("kept".into())));
    assert_eq!(
        field(&map, FIRST_QUEUE),
        Some(&Value::String("/quorum/q".into()))
    );
    assert_eq!(field(&map, FIRST_REASON), Some(&sym("rejected")));
    assert_eq!(field(&map, LAST_REASON), Some(&sym("rejected")));
    let deaths = field(&map, DEATHS).expect("x-opt-deaths");
    assert!(
        matches!(deaths, Value::List(_)),
        "x-opt-deaths is {deaths:?}"
    );
    let records = records(&out.bytes);
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(
        field(record, "queue"),
        Some(&Value::String("/quorum/q".into()))
    );
    assert_eq!(field(record, "reason"), Some(&sym("rejected")));
    assert_eq!(field(record, "count"), Some(&Value::Ulong(1)));
    assert_eq!(field(record, "first-time"), Some(&Value::Timestamp(1000)));
    assert_eq!(field(record, "last-time"), Some(&Value::Timestamp(1000)));
    assert_eq!(field(record, "ttl"), Some(&Value::Uint(5000)));
    let properties = sections::properties(&out.bytes).expect("ok").expect("some");
    assert_eq!(properties.message_id(), Some(&Value::String("id-1".into())));
}

#[test]
fn a_second_death_raises_the_count_of_its_queue_and_reason() {
    let (original, _) = message();
    let once =
        record_death(&original, &death("/quorum/q", DeathReason::Rejected, 1000)).expect("first");
    let other = record_death(
        &once.bytes,
        &death("/queues/r", DeathReason::DeliveryLimit, 2000),
    )
    .expect("second");
    let again = record_death(
        &other.bytes,
        &death("/quorum/q", DeathReason::Rejected, 3000),
    )
    .expect("third");
    let records = records(&again.bytes);
    assert_eq!(records.len(), 2, "compressed by (queue, reason)");
    assert_eq!(
        field(&records[0], "queue"),
        Some(&Value::String("/quorum/q".into())),
        "most recent first"
    );
    assert_eq!(field(&records[0], "count"), Some(&Value::Ulong(2)));
    assert_eq!(
        field(&records[0], "first-time"),
        Some(&Value::Timestamp(1000))
    );
    assert_eq!(
        field(&records[0], "last-time"),
        Some(&Value::Timestamp(3000))
    );
    assert_eq!(field(&records[1], "reason"), Some(&sym("delivery_limit")));
    assert_eq!(field(&records[1], "count"), Some(&Value::Ulong(1)));
    let map = annotations(&again.bytes);
    assert_eq!(
        field(&map, FIRST_QUEUE),
        Some(&Value::String("/quorum/q".into()))
    );
    assert_eq!(
        field(&annotations(&other.bytes), LAST_REASON),
        Some(&sym("delivery_limit"))
    );
    assert_eq!(field(&map, LAST_REASON), Some(&sym("rejected")));
}

#[test]
fn the_key_is_found_first_and_replaced_on_the_next_death() {
    let (original, _) = message();
    assert_eq!(dead_letter_key(&original), None);
    let mut keyed = death("/quorum/q", DeathReason::Expired, 5);
    keyed.key = Some(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let once = record_death(&original, &keyed).expect("keyed");
    assert_eq!(dead_letter_key(&once.bytes), keyed.key);
    keyed.key = Some(42);
    let twice = record_death(&once.bytes, &keyed).expect("rekeyed");
    assert_eq!(dead_letter_key(&twice.bytes), Some(42));
    let n_keys = annotations(&twice.bytes)
        .iter()
        .filter(|(k, _)| symbol_key(k, DEAD_LETTER_KEY))
        .count();
    assert_eq!(n_keys, 1);
    let unkeyed =
        record_death(&twice.bytes, &death("/quorum/q", DeathReason::Expired, 6)).expect("unkeyed");
    assert_eq!(dead_letter_key(&unkeyed.bytes), None);
}

#[test]
fn a_message_without_header_or_annotations_gets_only_annotations() {
    let mut out = BytesMut::new();
    section(&mut out, dc::AMQP_VALUE, &Value::String("v".into()));
    let original = out.freeze();
    let dead = record_death(&original, &death("/queues/a", DeathReason::Maxlen, 9)).expect("ok");
    let view = MessageView::scan(&dead.bytes).expect("valid");
    assert!(view.header.is_none());
    assert!(dead.bytes.ends_with(&original));
    assert_eq!(records(&dead.bytes).len(), 1);
    assert!(field(&records(&dead.bytes)[0], "ttl").is_none());
}

#[test]
fn cycles_without_a_rejection_are_detected() {
    let (original, _) = message();
    let mut to_b = death("/queues/a", DeathReason::Expired, 1);
    to_b.target = "/queues/b";
    let at_b = record_death(&original, &to_b).expect("a->b");
    assert!(!at_b.cycle);
    let mut to_a = death("/queues/b", DeathReason::Expired, 2);
    to_a.target = "/queues/a";
    let back = record_death(&at_b.bytes, &to_a).expect("b->a");
    assert!(back.cycle, "a expired to b, b expired back to a");
    let mut rejected = to_a;
    rejected.reason = DeathReason::Rejected;
    assert!(!record_death(&at_b.bytes, &rejected).expect("b->a").cycle);
    let mut to_self = death("/queues/a", DeathReason::Expired, 1);
    to_self.target = "/queues/a";
    assert!(record_death(&original, &to_self).expect("self").cycle);
}

#[test]
fn annotations_of_the_wrong_type_are_replaced() {
    let mut out = BytesMut::new();
    section(
        &mut out,
        dc::MESSAGE_ANNOTATIONS,
        &Value::Map(vec![
            (sym(DEATHS), Value::String("not a list".into())),
            (sym(FIRST_QUEUE), Value::Uint(3)),
        ]),
    );
    section(&mut out, dc::AMQP_VALUE, &Value::Null);
    let original = out.freeze();
    let dead = record_death(&original, &death("/queues/a", DeathReason::Rejected, 1)).expect("ok");
    assert_eq!(records(&dead.bytes).len(), 1);
    // A list of maps is taken as the history; other items are dropped.
    let mut out = BytesMut::new();
    let old = Value::Map(vec![
        (sym("queue"), Value::String("/queues/z".into())),
        (sym("reason"), sym("expired")),
        (sym("count"), Value::Long(4)),
    ]);
    section(
        &mut out,
        dc::MESSAGE_ANNOTATIONS,
        &Value::Map(vec![(sym(DEATHS), Value::List(vec![old, Value::Null]))]),
    );
    section(&mut out, dc::AMQP_VALUE, &Value::Null);
    let dead =
        record_death(&out.freeze(), &death("/queues/z", DeathReason::Expired, 1)).expect("ok");
    let records = records(&dead.bytes);
    assert_eq!(records.len(), 1);
    assert_eq!(field(&records[0], "count"), Some(&Value::Ulong(5)));
}

#[test]
fn malformed_input_never_panics() {
    let (original, _) = message();
    let mut keyed = death("/quorum/q", DeathReason::Rejected, 1);
    keyed.key = Some(7);
    let dead = record_death(&original, &keyed).expect("ok").bytes;
    for source in [&original, &dead] {
        for cut in 0..source.len() {
            let truncated = source.slice(..cut);
            let _ = record_death(&truncated, &keyed);
            let _ = dead_letter_key(&truncated);
        }
        // Every byte flipped in turn.
        for at in 0..source.len() {
            let mut bytes = source.to_vec();
            bytes[at] ^= 0xff;
            let bytes = Bytes::from(bytes);
            if let Ok(out) = record_death(&bytes, &keyed) {
                MessageView::scan(&out.bytes).expect("output is a valid message");
            }
            let _ = dead_letter_key(&bytes);
        }
    }
    assert!(record_death(&Bytes::new(), &keyed).is_err());
    assert!(record_death(&Bytes::from_static(&[0x00, 0x53]), &keyed).is_err());
}
