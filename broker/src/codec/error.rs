//! Errors raised while decoding AMQP 1.0 bytes, and their AMQP error
//! conditions.

/// Everything that can go wrong while decoding bytes from the network.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// The input ended before a complete value.
    #[error("input truncated")]
    Truncated,
    /// A format code that AMQP 1.0 does not define.
    #[error("invalid format code 0x{0:02x}")]
    InvalidFormatCode(u8),
    /// A value of one type where another was required.
    #[error("unexpected type: expected {expected}, found format code 0x{found:02x}")]
    UnexpectedType {
        /// What the decoder wanted.
        expected: &'static str,
        /// The format code it found.
        found: u8,
    },
    /// A described type with a descriptor this decoder does not know.
    #[error("unknown descriptor {0}")]
    UnknownDescriptor(String),
    /// A mandatory field of a composite type was null or absent.
    #[error("mandatory field {0} missing")]
    MissingField(&'static str),
    /// A string that is not valid UTF-8, or a symbol that is not ASCII.
    #[error("invalid text encoding")]
    InvalidText,
    /// A size or count field that cannot be right (e.g. count larger than size).
    #[error("invalid size or count: {0}")]
    InvalidSize(&'static str),
    /// Values nested deeper than the decoder allows.
    #[error("nesting too deep")]
    TooDeep,
    /// A restricted type with a value outside its choices.
    #[error("invalid value for {0}")]
    InvalidValue(&'static str),
    /// A frame larger than the negotiated max-frame-size.
    #[error("frame of {size} bytes exceeds max-frame-size {max}")]
    FrameTooLarge {
        /// Size announced by the frame header.
        size: u32,
        /// The limit in force.
        max: u32,
    },
    /// A frame header that is malformed (size < 8, doff < 2, doff beyond size).
    #[error("malformed frame header: {0}")]
    MalformedFrame(&'static str),
    /// A frame type other than AMQP (0x00) or SASL (0x01).
    #[error("unknown frame type 0x{0:02x}")]
    UnknownFrameType(u8),
}

impl CodecError {
    /// The AMQP error condition a peer should see for this error.
    pub fn condition(&self) -> &'static str {
        match self {
            CodecError::FrameTooLarge { .. } | CodecError::MalformedFrame(_) => {
                crate::codec::definitions::condition::FRAMING_ERROR
            }
            _ => crate::codec::definitions::condition::DECODE_ERROR,
        }
    }
}
