//! The control messages of local transactions (AMQP 1.0 part 4): what a
//! transaction controller sends to the coordinator, `declare` (0x31) and
//! `discharge` (0x32), each the amqp-value body of a message. The two
//! delivery states that answer them (`declared`, `transactional-state`)
//! are in `definitions.rs` with the other delivery states.
//!
//! Only the wire form lives here: it must not know what a transaction
//! stages or where its messages go (that is the engine's).

use bytes::Bytes;

use super::codes::{self, dc, fc};
use super::decode::{unexpected, Decoder};
use super::error::CodecError;
use super::value::Value;

/// A message to the transaction coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// amqp:declare:list: start a transaction.
    Declare {
        /// A global transaction id (distributed transactions), as sent.
        global_id: Option<Value>,
    },
    /// amqp:discharge:list: end a transaction.
    Discharge {
        /// The transaction.
        txn_id: Bytes,
        /// true: roll back; false (the default): commit.
        fail: bool,
    },
}

impl Control {
    /// The control message in `message` (an entire encoded message): its
    /// amqp-value body must be a declare or a discharge. Other sections
    /// (a header, properties) are skipped, as the spec asks.
    pub fn from_message(message: &Bytes) -> Result<Control, CodecError> {
        let mut rest = message.clone();
        let mut d = Decoder::new(&mut rest);
        while d.remaining() > 0 {
            let descriptor = match d.u8()? {
                fc::DESCRIBED => d.descriptor()?,
                other => return Err(unexpected("message section", other)),
            };
            let code = codes::descriptor_code(&descriptor)
                .ok_or_else(|| CodecError::UnknownDescriptor(codes::describe(&descriptor)))?;
            if code == dc::AMQP_VALUE {
                return control(&mut d);
            }
            d.skip_value()?;
        }
        Err(CodecError::InvalidValue(
            "a transaction control message needs an amqp-value body",
        ))
    }
}

/// A declare or a discharge, from the front of the amqp-value section.
fn control(d: &mut Decoder<'_>) -> Result<Control, CodecError> {
    let Some(descriptor) = d.opt_descriptor()? else {
        return Err(CodecError::InvalidValue(
            "a transaction control message is null",
        ));
    };
    match codes::descriptor_code(&descriptor) {
        Some(dc::DECLARE) => d.composite(|d, l| {
            Ok(Control::Declare {
                global_id: d.field(l, Decoder::opt_value)?,
            })
        }),
        Some(dc::DISCHARGE) => d.composite(|d, l| {
            Ok(Control::Discharge {
                txn_id: d.required(l, Decoder::opt_binary, "txn-id")?,
                fail: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
            })
        }),
        _ => Err(CodecError::UnknownDescriptor(codes::describe(&descriptor))),
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::codec::definitions::DeliveryState;
    use crate::codec::value::{Descriptor, Symbol};

    fn described(descriptor: Descriptor, value: Value) -> Value {
        Value::Described(Box::new((descriptor, value)))
    }

    fn message(body: Value) -> Bytes {
        let mut out = BytesMut::new();
        described(
            Descriptor::Code(dc::HEADER),
            Value::List(vec![Value::Bool(true)]),
        )
        .encode(&mut out);
        described(Descriptor::Code(dc::AMQP_VALUE), body).encode(&mut out);
        out.freeze()
    }

    #[test]
    fn declare_and_discharge_by_code_and_by_name() {
        let declare = message(described(
            Descriptor::Code(dc::DECLARE),
            Value::List(vec![Value::Null]),
        ));
        assert_eq!(
            Control::from_message(&declare).unwrap(),
            Control::Declare { global_id: None }
        );
        // Qpid Proton writes the symbolic descriptor.
        let discharge = message(described(
            Descriptor::Symbol(Symbol::from("amqp:discharge:list")),
            Value::List(vec![
                Value::Binary(Bytes::from_static(b"t1")),
                Value::Bool(true),
            ]),
        ));
        assert_eq!(
            Control::from_message(&discharge).unwrap(),
            Control::Discharge {
                txn_id: Bytes::from_static(b"t1"),
                fail: true
            }
        );
        let commit = message(described(
            Descriptor::Code(dc::DISCHARGE),
            Value::List(vec![Value::Binary(Bytes::from_static(b"t2"))]),
        ));
        assert!(matches!(
            Control::from_message(&commit).unwrap(),
            Control::Discharge { fail: false, .. }
        ));
    }

    #[test]
    fn anything_else_is_an_error_not_a_panic() {
        let no_id = message(described(
            Descriptor::Code(dc::DISCHARGE),
            Value::List(vec![]),
        ));
        assert!(Control::from_message(&no_id).is_err());
        let other = message(Value::String("declare".into()));
        assert!(Control::from_message(&other).is_err());
        assert!(Control::from_message(&Bytes::new()).is_err());
    }

    #[test]
    fn transactional_states_round_trip() {
        for state in [
            DeliveryState::Declared {
                txn_id: Bytes::from_static(b"\0\0\0\x01"),
            },
            DeliveryState::Transactional {
                txn_id: Bytes::from_static(b"x"),
                outcome: Some(Box::new(DeliveryState::Accepted)),
            },
            DeliveryState::Transactional {
                txn_id: Bytes::from_static(b"y"),
                outcome: None,
            },
        ] {
            let mut out = BytesMut::new();
            state.encode(&mut out);
            let mut bytes = out.freeze();
            assert_eq!(DeliveryState::decode(&mut bytes).unwrap(), state);
        }
        // A transactional state whose outcome is not an outcome.
        let nested = DeliveryState::Transactional {
            txn_id: Bytes::from_static(b"z"),
            outcome: Some(Box::new(DeliveryState::Declared {
                txn_id: Bytes::from_static(b"z"),
            })),
        };
        let mut out = BytesMut::new();
        nested.encode(&mut out);
        assert!(DeliveryState::decode(&mut out.freeze()).is_err());
    }
}
