//! A light scanner over an encoded message (messaging 3.2): finds the
//! section boundaries and decodes only the header, so the broker can
//! forward everything else byte for byte.

use bytes::{Bytes, BytesMut};

use super::codes::{self, dc, fc};
use super::decode::{unexpected, Decoder, ListFields};
use super::encode::CompositeWriter;
use super::error::CodecError;

/// The header section (amqp:header:list, 0x70).
#[derive(Debug, Clone, PartialEq)]
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

/// The spec's default header: priority 4, everything else false/0/absent.
impl Default for Header {
    fn default() -> Self {
        Header {
            durable: false,
            priority: PRIORITY_DEFAULT,
            ttl: None,
            first_acquirer: false,
            delivery_count: 0,
        }
    }
}

/// Default message priority (messaging 3.2.1).
pub const PRIORITY_DEFAULT: u8 = 4;

/// Where a section may appear in a message: sections must come in
/// increasing rank order, the body rank possibly repeated.
fn section_rank(code: u64) -> Option<u8> {
    Some(match code {
        dc::HEADER => 0,
        dc::DELIVERY_ANNOTATIONS => 1,
        dc::MESSAGE_ANNOTATIONS => 2,
        dc::PROPERTIES => 3,
        dc::APPLICATION_PROPERTIES => 4,
        dc::DATA | dc::AMQP_SEQUENCE | dc::AMQP_VALUE => 5,
        dc::FOOTER => 6,
        _ => return None,
    })
}

const BODY_RANK: u8 = 5;

impl MessageView {
    /// Walk the sections of `message` (an entire message, all transfer
    /// payloads joined), checking that each is a described value with a
    /// known section descriptor (0x70-0x78) in the spec's order, and decode
    /// the header if present. Bodies are skipped by their size prefixes,
    /// not decoded.
    pub fn scan(message: &Bytes) -> Result<MessageView, CodecError> {
        if message.is_empty() {
            return Err(CodecError::InvalidSize("empty message"));
        }
        // A cheap clone (a reference count), so the caller's view is untouched.
        let mut rest = message.clone();
        let mut d = Decoder::new(&mut rest);
        let mut view = MessageView {
            header: None,
            header_len: 0,
            n_sections: 0,
        };
        let mut last_rank: Option<u8> = None;
        let mut body_code: Option<u64> = None;
        while d.remaining() > 0 {
            let descriptor = match d.u8()? {
                fc::DESCRIBED => d.descriptor()?,
                other => return Err(unexpected("message section", other)),
            };
            let (code, rank) = codes::descriptor_code(&descriptor)
                .and_then(|code| Some((code, section_rank(code)?)))
                .ok_or_else(|| CodecError::UnknownDescriptor(codes::describe(&descriptor)))?;
            let in_order = match last_rank {
                None => true,
                // Several data or amqp-sequence sections, one amqp-value.
                Some(BODY_RANK) if rank == BODY_RANK => {
                    body_code == Some(code) && code != dc::AMQP_VALUE
                }
                Some(last) => rank > last,
            };
            if !in_order {
                return Err(CodecError::InvalidValue("message section order"));
            }
            if rank == BODY_RANK {
                body_code = Some(code);
            }
            last_rank = Some(rank);
            if code == dc::HEADER {
                view.header = Some(d.composite(Header::decode_fields)?);
                view.header_len = message.len() - d.remaining();
            } else {
                d.skip_value()?;
            }
            view.n_sections += 1;
        }
        Ok(view)
    }
}

impl Header {
    /// Append the header section (descriptor 0x70 and its list) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let mut w = CompositeWriter::begin(out, dc::HEADER);
        w.flag(self.durable)
            .ubyte_default(self.priority, PRIORITY_DEFAULT)
            .opt_uint(self.ttl)
            .flag(self.first_acquirer)
            .uint_default(self.delivery_count, 0);
        w.finish();
    }

    /// Decode a header section (descriptor and list) from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<Header, CodecError> {
        Decoder::new(input).expect_composite(dc::HEADER, Header::decode_fields)
    }

    fn decode_fields(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Header, CodecError> {
        Ok(Header {
            durable: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
            priority: d.field(l, Decoder::opt_ubyte)?.unwrap_or(PRIORITY_DEFAULT),
            ttl: d.field(l, Decoder::opt_uint)?,
            first_acquirer: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
            delivery_count: d.field(l, Decoder::opt_uint)?.unwrap_or(0),
        })
    }
}
