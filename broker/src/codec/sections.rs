//! Reading the bare message's *properties* (amqp:properties:list, 0x73)
//! and *application-properties* (0x74) sections out of an encoded message,
//! for the few paths that route or filter by them (anonymous relay, reply
//! queues, selectors). The publish hot path never calls this: it only
//! scans (`message.rs`).
//!
//! It decodes only the section asked for; every other section is skipped
//! by its size prefix.

use bytes::Bytes;

use super::codes::{self, dc, fc};
use super::decode::{unexpected, Decoder};
use super::error::CodecError;
use super::value::Value;

/// The properties section, field by field as decoded (messaging 3.2.4).
/// Absent trailing fields are `Value::Null`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Properties {
    fields: Vec<Value>,
}

/// Field positions of the properties list.
mod field {
    pub(super) const MESSAGE_ID: usize = 0;
    pub(super) const USER_ID: usize = 1;
    pub(super) const TO: usize = 2;
    pub(super) const SUBJECT: usize = 3;
    pub(super) const REPLY_TO: usize = 4;
    pub(super) const CORRELATION_ID: usize = 5;
    pub(super) const CONTENT_TYPE: usize = 6;
    pub(super) const CONTENT_ENCODING: usize = 7;
    pub(super) const ABSOLUTE_EXPIRY_TIME: usize = 8;
    pub(super) const CREATION_TIME: usize = 9;
    pub(super) const GROUP_ID: usize = 10;
    pub(super) const GROUP_SEQUENCE: usize = 11;
    pub(super) const REPLY_TO_GROUP_ID: usize = 12;
}

/// The properties fields' names as the spec spells them, in list order.
const FIELD_NAMES: [&str; 13] = [
    "message-id",
    "user-id",
    "to",
    "subject",
    "reply-to",
    "correlation-id",
    "content-type",
    "content-encoding",
    "absolute-expiry-time",
    "creation-time",
    "group-id",
    "group-sequence",
    "reply-to-group-id",
];

impl Properties {
    /// Whether `name` is a properties field's name (e.g. `subject`).
    pub fn is_field_name(name: &str) -> bool {
        FIELD_NAMES.contains(&name)
    }

    /// The field named `name` (as the spec spells it), if set.
    pub fn named(&self, name: &str) -> Option<&Value> {
        self.get(FIELD_NAMES.iter().position(|n| *n == name)?)
    }

    fn get(&self, index: usize) -> Option<&Value> {
        match self.fields.get(index) {
            None | Some(Value::Null) => None,
            Some(value) => Some(value),
        }
    }

    fn text(&self, index: usize) -> Option<&str> {
        match self.get(index)? {
            Value::String(s) => Some(s),
            Value::Symbol(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// message-id (any of the id types).
    pub fn message_id(&self) -> Option<&Value> {
        self.get(field::MESSAGE_ID)
    }
    /// user-id (binary).
    pub fn user_id(&self) -> Option<&Value> {
        self.get(field::USER_ID)
    }
    /// to: the address the message is for.
    pub fn to(&self) -> Option<&str> {
        self.text(field::TO)
    }
    /// subject.
    pub fn subject(&self) -> Option<&str> {
        self.text(field::SUBJECT)
    }
    /// reply-to: where answers go.
    pub fn reply_to(&self) -> Option<&str> {
        self.text(field::REPLY_TO)
    }
    /// correlation-id (any of the id types).
    pub fn correlation_id(&self) -> Option<&Value> {
        self.get(field::CORRELATION_ID)
    }
    /// content-type (a symbol).
    pub fn content_type(&self) -> Option<&str> {
        self.text(field::CONTENT_TYPE)
    }
    /// content-encoding (a symbol).
    pub fn content_encoding(&self) -> Option<&str> {
        self.text(field::CONTENT_ENCODING)
    }
    /// absolute-expiry-time (a timestamp).
    pub fn absolute_expiry_time(&self) -> Option<&Value> {
        self.get(field::ABSOLUTE_EXPIRY_TIME)
    }
    /// creation-time (a timestamp).
    pub fn creation_time(&self) -> Option<&Value> {
        self.get(field::CREATION_TIME)
    }
    /// group-id.
    pub fn group_id(&self) -> Option<&str> {
        self.text(field::GROUP_ID)
    }
    /// group-sequence (a uint).
    pub fn group_sequence(&self) -> Option<&Value> {
        self.get(field::GROUP_SEQUENCE)
    }
    /// reply-to-group-id.
    pub fn reply_to_group_id(&self) -> Option<&str> {
        self.text(field::REPLY_TO_GROUP_ID)
    }
}

/// The properties section of `message`, if it has one.
pub fn properties(message: &Bytes) -> Result<Option<Properties>, CodecError> {
    match section(message, dc::PROPERTIES)? {
        None => Ok(None),
        Some(Value::List(fields)) => Ok(Some(Properties { fields })),
        Some(_) => Err(CodecError::InvalidValue("properties section is not a list")),
    }
}

/// The application-properties section of `message` (a map, keys as sent),
/// if it has one.
pub fn application_properties(message: &Bytes) -> Result<Option<Vec<(Value, Value)>>, CodecError> {
    match section(message, dc::APPLICATION_PROPERTIES)? {
        None => Ok(None),
        Some(Value::Map(entries)) => Ok(Some(entries)),
        Some(_) => Err(CodecError::InvalidValue(
            "application-properties section is not a map",
        )),
    }
}

/// The application-properties section's map still encoded (a zero-copy
/// slice of `message`), if it has one: for [`map_lookup`], which finds one
/// key without decoding the others (what a filter needs per message).
pub fn application_properties_encoded(message: &Bytes) -> Result<Option<Bytes>, CodecError> {
    let mut rest = message.clone();
    let mut d = Decoder::new(&mut rest);
    if !find_section(&mut d, dc::APPLICATION_PROPERTIES)? {
        return Ok(None);
    }
    let start = message.len() - d.remaining();
    d.skip_value()?;
    Ok(Some(message.slice(start..message.len() - d.remaining())))
}

/// The value of the first entry of the encoded `map` whose key is the
/// string or symbol `key`; the other entries are skipped, not decoded.
pub fn map_lookup(map: &Bytes, key: &str) -> Result<Option<Value>, CodecError> {
    let mut rest = map.clone();
    let mut d = Decoder::new(&mut rest);
    let wide = match d.u8()? {
        fc::MAP8 => false,
        fc::MAP32 => true,
        other => return Err(unexpected("map", other)),
    };
    let (n_pairs, _) = d.map_header(wide)?;
    for _ in 0..n_pairs {
        let matches = match d.peek_u8()? {
            code @ (fc::STR8 | fc::STR32 | fc::SYM8 | fc::SYM32) => {
                d.u8()?;
                d.variable(code)?.as_ref() == key.as_bytes()
            }
            _ => {
                d.skip_value()?;
                false
            }
        };
        if matches {
            return d.value().map(Some);
        }
        d.skip_value()?;
    }
    Ok(None)
}

/// Move `d` to the value of the first section with descriptor `wanted`
/// (true), skipping the others; false once a section that may not precede
/// it (the body or the footer) is reached, or at the end.
fn find_section(d: &mut Decoder<'_>, wanted: u64) -> Result<bool, CodecError> {
    while d.remaining() > 0 {
        let descriptor = match d.u8()? {
            fc::DESCRIBED => d.descriptor()?,
            other => return Err(unexpected("message section", other)),
        };
        let code = codes::descriptor_code(&descriptor)
            .ok_or_else(|| CodecError::UnknownDescriptor(codes::describe(&descriptor)))?;
        if code == wanted {
            return Ok(true);
        }
        if code > dc::APPLICATION_PROPERTIES {
            return Ok(false);
        }
        d.skip_value()?;
    }
    Ok(false)
}

/// The value of the first section with descriptor `wanted`, skipping the
/// others; `None` once a section that may not precede it (the body or the
/// footer) is reached.
fn section(message: &Bytes, wanted: u64) -> Result<Option<Value>, CodecError> {
    let mut rest = message.clone();
    let mut d = Decoder::new(&mut rest);
    if !find_section(&mut d, wanted)? {
        return Ok(None);
    }
    d.value().map(Some)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::codec::value::{Descriptor, Symbol};

    fn described(code: u64, value: Value) -> Value {
        Value::Described(Box::new((Descriptor::Code(code), value)))
    }

    fn encode(sections: &[Value]) -> Bytes {
        let mut out = BytesMut::new();
        for s in sections {
            s.encode(&mut out);
        }
        out.freeze()
    }

    #[test]
    fn finds_to_and_application_properties_after_a_header() {
        let message = encode(&[
            described(dc::HEADER, Value::List(vec![Value::Bool(true)])),
            described(
                dc::PROPERTIES,
                Value::List(vec![
                    Value::String("id-1".into()),
                    Value::Null,
                    Value::String("/queues/a".into()),
                    Value::Null,
                    Value::String("/queues/reply".into()),
                ]),
            ),
            described(
                dc::APPLICATION_PROPERTIES,
                Value::Map(vec![(Value::String("colour".into()), Value::Int(3))]),
            ),
            described(dc::AMQP_VALUE, Value::String("body".into())),
        ]);
        let props = properties(&message).unwrap().unwrap();
        assert_eq!(props.to(), Some("/queues/a"));
        assert_eq!(props.reply_to(), Some("/queues/reply"));
        assert_eq!(props.subject(), None);
        assert_eq!(props.message_id(), Some(&Value::String("id-1".into())));
        let app = application_properties(&message).unwrap().unwrap();
        assert_eq!(app, vec![(Value::String("colour".into()), Value::Int(3))]);
    }

    #[test]
    fn absent_sections_are_none_and_garbage_is_an_error() {
        let body_only = encode(&[described(dc::DATA, Value::Binary(Bytes::from_static(b"x")))]);
        assert_eq!(properties(&body_only).unwrap(), None);
        assert_eq!(application_properties(&body_only).unwrap(), None);
        assert!(properties(&Bytes::from_static(&[0x00, 0x53])).is_err());
        let not_a_list = encode(&[described(dc::PROPERTIES, Value::Symbol(Symbol::from("x")))]);
        assert!(properties(&not_a_list).is_err());
    }

    #[test]
    fn map_lookup_finds_one_key_and_skips_the_rest() {
        let message = encode(&[
            described(
                dc::APPLICATION_PROPERTIES,
                Value::Map(vec![
                    (Value::Int(1), Value::List(vec![Value::Null])),
                    (Value::String("a".into()), Value::Long(-1)),
                    (Value::Symbol(Symbol::from("b")), Value::String("x".into())),
                    (Value::String("a".into()), Value::Long(2)),
                ]),
            ),
            described(dc::AMQP_VALUE, Value::Null),
        ]);
        let map = application_properties_encoded(&message).unwrap().unwrap();
        assert_eq!(map_lookup(&map, "a").unwrap(), Some(Value::Long(-1)));
        assert_eq!(
            map_lookup(&map, "b").unwrap(),
            Some(Value::String("x".into()))
        );
        assert_eq!(map_lookup(&map, "c").unwrap(), None);
        let body_only = encode(&[described(dc::AMQP_VALUE, Value::Null)]);
        assert_eq!(application_properties_encoded(&body_only).unwrap(), None);
        assert!(map_lookup(&Bytes::from_static(&[0xc1, 0x09, 0x02]), "a").is_err());
    }
}
