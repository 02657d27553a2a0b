//! The check the `selector_parser` fuzz target (and the corpus replay
//! test) runs: any bytes, as a selector, must either be refused with a
//! [`SelectorError`](super::SelectorError) or parse and evaluate against a
//! message, never panic nor overflow the stack; a parsed selector gives
//! the same answer twice. Also the seeds: selectors using every construct.
//!
//! It must not know how filters reach a queue.

use bytes::BytesMut;

use super::super::message::Message;
use super::fuzz_selector;
use crate::codec::{Descriptor, MessageView, Value};

/// A message with a header, properties and application properties of
/// several types, for selectors to read.
fn sample() -> Option<Message> {
    let described =
        |code: u64, value: Value| Value::Described(Box::new((Descriptor::Code(code), value)));
    let mut out = BytesMut::new();
    described(0x70, Value::List(vec![Value::Bool(true), Value::Ubyte(6)])).encode(&mut out);
    let properties = Value::List(vec![
        Value::String("id-1".into()),
        Value::Binary(bytes::Bytes::from_static(b"user")),
        Value::String("/queues/a".into()),
        Value::String("subject".into()),
    ]);
    described(0x73, properties).encode(&mut out);
    let app = Value::Map(vec![
        (Value::String("colour".into()), Value::String("red".into())),
        (Value::String("n".into()), Value::Int(-3)),
        (Value::String("x".into()), Value::Double(0.5)),
        (Value::String("b".into()), Value::Bool(false)),
    ]);
    described(0x74, app).encode(&mut out);
    described(0x77, Value::Null).encode(&mut out);
    let bytes = out.freeze();
    let view = MessageView::scan(&bytes).ok()?;
    Some(Message {
        header: view.header,
        header_len: view.header_len as u32,
        bytes,
    })
}

/// The check: `data` (lossily as UTF-8) as a selector.
pub fn selector_parser(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Some(message) = sample() else {
        panic!("the sample message does not scan");
    };
    let first = fuzz_selector(&text, &message);
    assert_eq!(
        first,
        fuzz_selector(&text, &message),
        "{text:?} is not deterministic"
    );
}

/// Selectors using every construct, as seeds.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        "colour = 'red' AND n < 0 OR NOT (x >= 1.5E0)",
        "colour IN ('red', 'it''s') AND n NOT IN (1, -2)",
        "colour LIKE 'r\\_%' ESCAPE '\\' OR colour NOT LIKE '_e%'",
        "n BETWEEN -5 AND 5 AND x NOT BETWEEN 1 AND 2",
        "missing IS NULL AND colour IS NOT NULL AND b = FALSE",
        "(n + 2) * 3 / 2 - -1 <> 0x10 AND 10L > n",
        "JMSPriority > 4 AND JMSDeliveryMode = 'PERSISTENT' AND JMSXUserID = 'user'",
        "\"colour\" = 'red' AND JMSMessageID = 'id-1' AND JMSType = 'subject'",
    ]
    .into_iter()
    .map(|s| ("selector_parser", s.as_bytes().to_vec()))
    .collect()
}
