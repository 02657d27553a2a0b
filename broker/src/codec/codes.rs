//! Format codes (types 1.6) and descriptor codes of the composite types the
//! codec knows, with their symbolic names, in one place so that decoders
//! and encoders cannot disagree about a number.

use super::value::Descriptor;

/// Primitive format codes (constructors), named as in types.xml.
pub(crate) mod fc {
    pub(crate) const DESCRIBED: u8 = 0x00;
    pub(crate) const NULL: u8 = 0x40;
    pub(crate) const BOOLEAN: u8 = 0x56;
    pub(crate) const TRUE: u8 = 0x41;
    pub(crate) const FALSE: u8 = 0x42;
    pub(crate) const UBYTE: u8 = 0x50;
    pub(crate) const USHORT: u8 = 0x60;
    pub(crate) const UINT: u8 = 0x70;
    pub(crate) const SMALLUINT: u8 = 0x52;
    pub(crate) const UINT0: u8 = 0x43;
    pub(crate) const ULONG: u8 = 0x80;
    pub(crate) const SMALLULONG: u8 = 0x53;
    pub(crate) const ULONG0: u8 = 0x44;
    pub(crate) const BYTE: u8 = 0x51;
    pub(crate) const SHORT: u8 = 0x61;
    pub(crate) const INT: u8 = 0x71;
    pub(crate) const SMALLINT: u8 = 0x54;
    pub(crate) const LONG: u8 = 0x81;
    pub(crate) const SMALLLONG: u8 = 0x55;
    pub(crate) const FLOAT: u8 = 0x72;
    pub(crate) const DOUBLE: u8 = 0x82;
    pub(crate) const DECIMAL32: u8 = 0x74;
    pub(crate) const DECIMAL64: u8 = 0x84;
    pub(crate) const DECIMAL128: u8 = 0x94;
    pub(crate) const CHAR: u8 = 0x73;
    pub(crate) const TIMESTAMP: u8 = 0x83;
    pub(crate) const UUID: u8 = 0x98;
    pub(crate) const VBIN8: u8 = 0xa0;
    pub(crate) const VBIN32: u8 = 0xb0;
    pub(crate) const STR8: u8 = 0xa1;
    pub(crate) const STR32: u8 = 0xb1;
    pub(crate) const SYM8: u8 = 0xa3;
    pub(crate) const SYM32: u8 = 0xb3;
    pub(crate) const LIST0: u8 = 0x45;
    pub(crate) const LIST8: u8 = 0xc0;
    pub(crate) const LIST32: u8 = 0xd0;
    pub(crate) const MAP8: u8 = 0xc1;
    pub(crate) const MAP32: u8 = 0xd1;
    pub(crate) const ARRAY8: u8 = 0xe0;
    pub(crate) const ARRAY32: u8 = 0xf0;
}

/// Descriptor codes (domain 0x00000000) of the composite and section types.
pub(crate) mod dc {
    pub(crate) const OPEN: u64 = 0x10;
    pub(crate) const BEGIN: u64 = 0x11;
    pub(crate) const ATTACH: u64 = 0x12;
    pub(crate) const FLOW: u64 = 0x13;
    pub(crate) const TRANSFER: u64 = 0x14;
    pub(crate) const DISPOSITION: u64 = 0x15;
    pub(crate) const DETACH: u64 = 0x16;
    pub(crate) const END: u64 = 0x17;
    pub(crate) const CLOSE: u64 = 0x18;
    pub(crate) const ERROR: u64 = 0x1d;
    pub(crate) const RECEIVED: u64 = 0x23;
    pub(crate) const ACCEPTED: u64 = 0x24;
    pub(crate) const REJECTED: u64 = 0x25;
    pub(crate) const RELEASED: u64 = 0x26;
    pub(crate) const MODIFIED: u64 = 0x27;
    pub(crate) const SOURCE: u64 = 0x28;
    pub(crate) const TARGET: u64 = 0x29;
    pub(crate) const COORDINATOR: u64 = 0x30;
    pub(crate) const DECLARE: u64 = 0x31;
    pub(crate) const DISCHARGE: u64 = 0x32;
    pub(crate) const DECLARED: u64 = 0x33;
    pub(crate) const TRANSACTIONAL_STATE: u64 = 0x34;
    pub(crate) const SASL_MECHANISMS: u64 = 0x40;
    pub(crate) const SASL_INIT: u64 = 0x41;
    pub(crate) const SASL_CHALLENGE: u64 = 0x42;
    pub(crate) const SASL_RESPONSE: u64 = 0x43;
    pub(crate) const SASL_OUTCOME: u64 = 0x44;
    pub(crate) const HEADER: u64 = 0x70;
    pub(crate) const DELIVERY_ANNOTATIONS: u64 = 0x71;
    pub(crate) const MESSAGE_ANNOTATIONS: u64 = 0x72;
    pub(crate) const PROPERTIES: u64 = 0x73;
    pub(crate) const APPLICATION_PROPERTIES: u64 = 0x74;
    pub(crate) const DATA: u64 = 0x75;
    pub(crate) const AMQP_SEQUENCE: u64 = 0x76;
    pub(crate) const AMQP_VALUE: u64 = 0x77;
    pub(crate) const FOOTER: u64 = 0x78;
}

/// Symbolic descriptor names (from the spec XML) and their numeric codes.
/// Peers may send either form; the codec maps names to codes once, at the
/// descriptor, so the field decoders only ever match on numbers.
const SYMBOLIC_DESCRIPTORS: &[(&str, u64)] = &[
    ("amqp:open:list", dc::OPEN),
    ("amqp:begin:list", dc::BEGIN),
    ("amqp:attach:list", dc::ATTACH),
    ("amqp:flow:list", dc::FLOW),
    ("amqp:transfer:list", dc::TRANSFER),
    ("amqp:disposition:list", dc::DISPOSITION),
    ("amqp:detach:list", dc::DETACH),
    ("amqp:end:list", dc::END),
    ("amqp:close:list", dc::CLOSE),
    ("amqp:error:list", dc::ERROR),
    ("amqp:received:list", dc::RECEIVED),
    ("amqp:accepted:list", dc::ACCEPTED),
    ("amqp:rejected:list", dc::REJECTED),
    ("amqp:released:list", dc::RELEASED),
    ("amqp:modified:list", dc::MODIFIED),
    ("amqp:source:list", dc::SOURCE),
    ("amqp:target:list", dc::TARGET),
    ("amqp:delete-on-close:list", 0x2b),
    ("amqp:delete-on-no-links:list", 0x2c),
    ("amqp:delete-on-no-messages:list", 0x2d),
    ("amqp:delete-on-no-links-or-messages:list", 0x2e),
    ("amqp:coordinator:list", dc::COORDINATOR),
    ("amqp:declare:list", dc::DECLARE),
    ("amqp:discharge:list", dc::DISCHARGE),
    ("amqp:declared:list", dc::DECLARED),
    ("amqp:transactional-state:list", dc::TRANSACTIONAL_STATE),
    ("amqp:sasl-mechanisms:list", dc::SASL_MECHANISMS),
    ("amqp:sasl-init:list", dc::SASL_INIT),
    ("amqp:sasl-challenge:list", dc::SASL_CHALLENGE),
    ("amqp:sasl-response:list", dc::SASL_RESPONSE),
    ("amqp:sasl-outcome:list", dc::SASL_OUTCOME),
    ("amqp:header:list", dc::HEADER),
    ("amqp:delivery-annotations:map", dc::DELIVERY_ANNOTATIONS),
    ("amqp:message-annotations:map", dc::MESSAGE_ANNOTATIONS),
    ("amqp:properties:list", dc::PROPERTIES),
    (
        "amqp:application-properties:map",
        dc::APPLICATION_PROPERTIES,
    ),
    ("amqp:data:binary", dc::DATA),
    ("amqp:amqp-sequence:list", dc::AMQP_SEQUENCE),
    ("amqp:amqp-value:*", dc::AMQP_VALUE),
    ("amqp:footer:map", dc::FOOTER),
];

/// The numeric code of a symbolic descriptor name the codec knows.
pub(crate) fn code_of_name(name: &[u8]) -> Option<u64> {
    SYMBOLIC_DESCRIPTORS
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .map(|&(_, code)| code)
}

/// The numeric code of a descriptor, whichever form it was sent in.
pub(crate) fn descriptor_code(descriptor: &Descriptor) -> Option<u64> {
    match descriptor {
        Descriptor::Code(code) => Some(*code),
        Descriptor::Symbol(name) => code_of_name(name.as_str().as_bytes()),
    }
}

/// Human-readable form of a descriptor for error messages, in the spec's
/// `domain:id` notation for numeric codes.
pub(crate) fn describe(descriptor: &Descriptor) -> String {
    match descriptor {
        Descriptor::Code(code) => format!("0x{:08x}:0x{:08x}", code >> 32, code & 0xffff_ffff),
        Descriptor::Symbol(name) => name.as_str().to_owned(),
    }
}
