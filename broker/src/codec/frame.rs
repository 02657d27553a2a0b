//! Protocol headers and frames (transport 2.2-2.3): splitting whole frames
//! off a receive buffer under an explicit max-frame-size, and writing frame
//! headers in front of encoded bodies.

use bytes::{Bytes, BytesMut};

use super::error::CodecError;
use super::performative::Performative;
use super::sasl::SaslFrame;

/// Size of the fixed frame header (size, doff, type, channel).
pub const FRAME_HEADER_BYTES: usize = 8;
/// The smallest max-frame-size a peer may announce (transport 2.7.1).
pub const MIN_MAX_FRAME_SIZE: u32 = 512;
/// Protocol header for plain AMQP.
pub const AMQP_HEADER: [u8; 8] = *b"AMQP\x00\x01\x00\x00";
/// Protocol header that starts a SASL layer.
pub const SASL_HEADER: [u8; 8] = *b"AMQP\x03\x01\x00\x00";
/// Protocol header that starts a TLS layer.
pub const TLS_HEADER: [u8; 8] = *b"AMQP\x02\x01\x00\x00";

/// The eight bytes that open every AMQP connection (and every layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolHeader {
    /// AMQP 1.0.0, protocol id 0
    Amqp,
    /// SASL layer, protocol id 3
    Sasl,
    /// TLS layer, protocol id 2
    Tls,
    /// Anything else; the connection must be refused with our own header.
    Other([u8; 8]),
}

impl ProtocolHeader {
    /// Classify eight received bytes.
    pub fn parse(bytes: &[u8; 8]) -> ProtocolHeader {
        match *bytes {
            AMQP_HEADER => ProtocolHeader::Amqp,
            SASL_HEADER => ProtocolHeader::Sasl,
            TLS_HEADER => ProtocolHeader::Tls,
            other => ProtocolHeader::Other(other),
        }
    }
}

/// The body of a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    /// An AMQP frame: a performative and the bytes that follow it (the
    /// transfer payload; empty for other performatives).
    Amqp {
        /// The performative.
        performative: Performative,
        /// Payload bytes, a slice of the receive buffer.
        payload: Bytes,
    },
    /// A SASL frame.
    Sasl(SaslFrame),
    /// An AMQP frame with an empty body: a heartbeat.
    Empty,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Channel number (always 0 for SASL frames).
    pub channel: u16,
    /// What the frame carries.
    pub body: FrameBody,
}

/// Split one whole frame off the front of `buf` and decode it.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame; nothing is
/// consumed then. A frame whose announced size exceeds `max_frame_size` is
/// an error as soon as its header has arrived, before any of its body is
/// buffered. The payload of a transfer is a zero-copy slice of `buf`.
pub fn decode_frame(buf: &mut BytesMut, max_frame_size: u32) -> Result<Option<Frame>, CodecError> {
    let _ = (buf, max_frame_size);
    unimplemented!("codec: decode_frame")
}

/// Append a frame header and `performative` to `out`, announcing a frame
/// size that also counts `payload_len` bytes that the caller appends (or
/// writes) right after. Used for transfers so that the payload can be
/// written from its own buffer without copying.
pub fn encode_amqp_frame(
    out: &mut BytesMut,
    channel: u16,
    performative: &Performative,
    payload_len: usize,
) {
    let _ = (out, channel, performative, payload_len);
    unimplemented!("codec: encode_amqp_frame")
}

/// The number of bytes `encode_amqp_frame` writes for `performative`
/// (header + performative, not the payload). Lets the engine split a
/// message into frames no larger than the peer's max-frame-size.
pub fn amqp_frame_overhead(performative: &Performative) -> usize {
    let _ = performative;
    unimplemented!("codec: amqp_frame_overhead")
}

/// Append a whole SASL frame to `out`.
pub fn encode_sasl_frame(out: &mut BytesMut, frame: &SaslFrame) {
    let _ = (out, frame);
    unimplemented!("codec: encode_sasl_frame")
}

/// Append an empty AMQP frame (a heartbeat) on channel 0 to `out`.
pub fn encode_empty_frame(out: &mut BytesMut) {
    out.extend_from_slice(&[0, 0, 0, 8, 2, 0, 0, 0]);
}
