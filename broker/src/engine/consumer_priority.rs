//! A consuming link's priority, from its attach `properties`: the key
//! `rabbitmq:priority` (RabbitMQ 4's AMQP 1.0 name) or `priority` (ActiveMQ
//! Artemis's), an integer that fits in 32 bits signed; 0 when absent.
//! Higher numbers are served first (see `queue/consumer_order.rs`).
//!
//! It reads a decoded fields map only; what the priority does is the
//! queue's business.

use crate::codec::definitions::condition;
use crate::codec::{Error, Fields, Value};

/// The attach property keys that carry a consumer priority.
const PRIORITY_KEYS: [&str; 2] = ["rabbitmq:priority", "priority"];

/// The priority the receiver's attach asks for; amqp:invalid-field when
/// the value is not an integer in the 32-bit signed range.
pub(crate) fn consumer_priority(properties: Option<&Fields>) -> Result<i32, Error> {
    let Some(properties) = properties else {
        return Ok(0);
    };
    let Some((key, value)) = properties
        .iter()
        .find(|(key, _)| PRIORITY_KEYS.contains(&key.as_str()))
    else {
        return Ok(0);
    };
    let wide: Option<i64> = match value {
        Value::Byte(v) => Some(i64::from(*v)),
        Value::Short(v) => Some(i64::from(*v)),
        Value::Int(v) => Some(i64::from(*v)),
        Value::Long(v) => Some(*v),
        Value::Ubyte(v) => Some(i64::from(*v)),
        Value::Ushort(v) => Some(i64::from(*v)),
        Value::Uint(v) => Some(i64::from(*v)),
        Value::Ulong(v) => i64::try_from(*v).ok(),
        _ => None,
    };
    wide.and_then(|v| i32::try_from(v).ok()).ok_or_else(|| {
        Error::new(
            condition::INVALID_FIELD,
            format!(
                "link property {}: the consumer priority must be an integer \
                 from -2147483648 to 2147483647",
                key.as_str()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Symbol;

    fn props(key: &str, value: Value) -> Fields {
        vec![
            (Symbol::from("other"), Value::Bool(true)),
            (Symbol::from(key), value),
        ]
    }

    #[test]
    fn both_keys_and_every_integer_width_are_read() {
        assert_eq!(consumer_priority(None).unwrap(), 0);
        assert_eq!(consumer_priority(Some(&Vec::new())).unwrap(), 0);
        let rabbit = props("rabbitmq:priority", Value::Int(7));
        assert_eq!(consumer_priority(Some(&rabbit)).unwrap(), 7);
        let artemis = props("priority", Value::Long(-3));
        assert_eq!(consumer_priority(Some(&artemis)).unwrap(), -3);
        let small = props("priority", Value::Ubyte(200));
        assert_eq!(consumer_priority(Some(&small)).unwrap(), 200);
    }

    #[test]
    fn a_value_that_is_no_32_bit_integer_is_an_invalid_field() {
        for value in [
            Value::Long(i64::from(i32::MAX) + 1),
            Value::Ulong(u64::MAX),
            Value::Uint(u32::MAX),
            Value::Bool(true),
            Value::Null,
        ] {
            let error = consumer_priority(Some(&props("rabbitmq:priority", value))).unwrap_err();
            assert_eq!(error.condition.as_str(), condition::INVALID_FIELD);
        }
    }
}
