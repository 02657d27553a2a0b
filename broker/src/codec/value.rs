//! The AMQP 1.0 type system as a generic value tree, plus the primitive
//! encoders and decoders every other codec module builds on.
//!
//! Hot-path types (performatives) are decoded field by field without going
//! through [`Value`]; the tree is for the open-ended parts of the protocol
//! (properties, filters, annotations, unknown described types).

use bytes::{Bytes, BytesMut};

use super::decode::Decoder;
use super::encode;
use super::error::CodecError;

/// Deepest nesting of lists/maps/arrays/described values the decoder accepts.
pub const NESTING_DEPTH_MAX: usize = 32;

/// An AMQP symbol: ASCII text used for names, conditions and capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Symbol(pub String);

impl Symbol {
    /// The symbol as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Symbol {
    fn from(s: &str) -> Self {
        Symbol(s.to_owned())
    }
}

/// The descriptor of a described type: a numeric code or a symbolic name.
#[derive(Debug, Clone, PartialEq)]
pub enum Descriptor {
    /// `domain:id` packed as a ulong, e.g. `0x0000_0000_0000_0010` for open.
    Code(u64),
    /// A symbolic descriptor such as `amqp:open:list`.
    Symbol(Symbol),
}

/// An AMQP array: every element has the same constructor.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Descriptor shared by all elements, for arrays of described values.
    pub descriptor: Option<Descriptor>,
    /// The element format code (e.g. 0xa3 for sym8, 0xb3 for sym32).
    pub format_code: u8,
    /// The elements (without their descriptor, if any).
    pub items: Vec<Value>,
}

/// A `fields` map: symbol keys, any values.
pub type Fields = Vec<(Symbol, Value)>;

/// Any AMQP 1.0 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// null
    Null,
    /// boolean
    Bool(bool),
    /// ubyte
    Ubyte(u8),
    /// ushort
    Ushort(u16),
    /// uint
    Uint(u32),
    /// ulong
    Ulong(u64),
    /// byte
    Byte(i8),
    /// short
    Short(i16),
    /// int
    Int(i32),
    /// long
    Long(i64),
    /// float
    Float(f32),
    /// double
    Double(f64),
    /// decimal32, raw IEEE 754 bytes
    Decimal32([u8; 4]),
    /// decimal64, raw IEEE 754 bytes
    Decimal64([u8; 8]),
    /// decimal128, raw IEEE 754 bytes
    Decimal128([u8; 16]),
    /// char (UTF-32)
    Char(char),
    /// timestamp, milliseconds since the Unix epoch
    Timestamp(i64),
    /// uuid
    Uuid([u8; 16]),
    /// binary, a slice of the received buffer
    Binary(Bytes),
    /// string
    String(String),
    /// symbol
    Symbol(Symbol),
    /// list
    List(Vec<Value>),
    /// map, in wire order (keys may be of any type)
    Map(Vec<(Value, Value)>),
    /// array
    Array(Array),
    /// a described value
    Described(Box<(Descriptor, Value)>),
}

impl Value {
    /// Decode one value from the front of `input`, advancing it.
    pub fn decode(input: &mut Bytes) -> Result<Value, CodecError> {
        Decoder::new(input).value()
    }

    /// Append the encoding of this value to `out` (smallest encoding that fits).
    pub fn encode(&self, out: &mut BytesMut) {
        encode::put_value(out, self);
    }
}
