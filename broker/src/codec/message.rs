//! A light scanner over an encoded message (messaging 3.2): finds the
//! section boundaries and decodes only the header, so the broker can
//! forward everything else byte for byte.

use bytes::{Bytes, BytesMut};

use super::error::CodecError;

/// The header section (amqp:header:list, 0x70).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    /// durable (default false)
    pub durable: bool,
    /// priority (default 4)
    pub priority: u8,
    /// ttl in milliseconds
    pub ttl: Option<u32>,
    /// first-acquirer (default false)
    pub first_acquirer: bool,
    /// delivery-count (default 0)
    pub delivery_count: u32,
}

/// Where the sections of an encoded message are.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    /// The decoded header section, if the message starts with one.
    pub header: Option<Header>,
    /// Bytes taken by the header section at the start of the message (0 if
    /// there is none): `&bytes[header_len..]` is the rest of the message.
    pub header_len: usize,
    /// Number of sections found (header included).
    pub n_sections: usize,
}

impl MessageView {
    /// Walk the sections of `message` (an entire message, all transfer
    /// payloads joined), checking that each is a described value with a
    /// known section descriptor (0x70-0x78) in the spec's order, and decode
    /// the header if present. Bodies are skipped by their size prefixes,
    /// not decoded.
    pub fn scan(message: &Bytes) -> Result<MessageView, CodecError> {
        let _ = message;
        unimplemented!("codec: MessageView::scan")
    }
}

impl Header {
    /// Append the header section (descriptor 0x70 and its list) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let _ = out;
        unimplemented!("codec: Header::encode")
    }
}
