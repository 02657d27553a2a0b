//! Protocol headers and frames (transport 2.2-2.3): splitting whole frames
//! off a receive buffer under an explicit max-frame-size, and writing frame
//! headers in front of encoded bodies.

use std::cell::RefCell;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::codes::dc;
use super::definitions::DeliveryState;
use super::encode::{SmallFrame, SMALL_BINARY_MAX};
use super::error::CodecError;
use super::performative::Performative;
use super::sasl::SaslFrame;
use super::transfer_head::TransferHead;

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

/// Frame type of AMQP frames.
const FRAME_TYPE_AMQP: u8 = 0x00;
/// Frame type of SASL frames.
const FRAME_TYPE_SASL: u8 = 0x01;

/// Split one whole frame off the front of `buf` and decode it.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame; nothing is
/// consumed then. A frame whose announced size exceeds `max_frame_size` is
/// an error as soon as its header has arrived, before any of its body is
/// buffered. The payload of a transfer is a zero-copy slice of `buf`.
pub fn decode_frame(buf: &mut BytesMut, max_frame_size: u32) -> Result<Option<Frame>, CodecError> {
    let Some(header) = buf.get(..FRAME_HEADER_BYTES) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let doff = header[4];
    let frame_type = header[5];
    let channel = u16::from_be_bytes([header[6], header[7]]);
    if (size as usize) < FRAME_HEADER_BYTES {
        return Err(CodecError::MalformedFrame("size < 8"));
    }
    if size > max_frame_size {
        return Err(CodecError::FrameTooLarge {
            size,
            max: max_frame_size,
        });
    }
    if doff < 2 {
        return Err(CodecError::MalformedFrame("doff < 2"));
    }
    let body_offset = usize::from(doff) * 4;
    if body_offset > size as usize {
        return Err(CodecError::MalformedFrame("doff beyond frame size"));
    }
    if frame_type != FRAME_TYPE_AMQP && frame_type != FRAME_TYPE_SASL {
        return Err(CodecError::UnknownFrameType(frame_type));
    }
    let size = size as usize;
    if buf.len() < size {
        // Bounded by max_frame_size, checked above.
        buf.reserve(size - buf.len());
        return Ok(None);
    }
    let mut body = buf.split_to(size).freeze();
    // The extended header (doff > 2) carries nothing AMQP 1.0 defines.
    body.advance(body_offset);
    let body = if frame_type == FRAME_TYPE_SASL {
        let sasl = SaslFrame::decode(&mut body)?;
        if !body.is_empty() {
            return Err(CodecError::InvalidSize("trailing bytes"));
        }
        FrameBody::Sasl(sasl)
    } else if body.is_empty() {
        FrameBody::Empty
    } else {
        let performative = Performative::decode(&mut body)?;
        if !body.is_empty() && !matches!(performative, Performative::Transfer(_)) {
            return Err(CodecError::InvalidSize("trailing bytes"));
        }
        FrameBody::Amqp {
            performative,
            payload: body,
        }
    };
    Ok(Some(Frame { channel, body }))
}

/// Write a frame header with a size placeholder; returns its position.
fn begin_frame(out: &mut BytesMut, frame_type: u8, channel: u16) -> usize {
    let start = out.len();
    out.put_u32(0);
    out.put_u8(2);
    out.put_u8(frame_type);
    out.put_u16(channel);
    start
}

/// Patch the size of the frame begun at `start`, counting `extra` bytes that
/// the caller writes after what `out` holds now.
fn finish_frame(out: &mut BytesMut, start: usize, extra: usize) {
    let size = out.len() - start + extra;
    debug_assert!(u32::try_from(size).is_ok(), "frame larger than 4 GiB");
    out[start..start + 4].copy_from_slice(&(size as u32).to_be_bytes());
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
    // Dispositions (one or more per message) in one copy from the stack.
    if let Performative::Disposition(d) = performative {
        let state = match &d.state {
            None => Some(None),
            Some(DeliveryState::Accepted) => Some(Some(dc::ACCEPTED as u8)),
            Some(DeliveryState::Released) => Some(Some(dc::RELEASED as u8)),
            Some(_) => None,
        };
        if let Some(state) = state {
            let mut f = SmallFrame::begin(channel, dc::DISPOSITION as u8);
            f.boolean(d.role.as_bool())
                .uint(d.first)
                .opt_uint(d.last)
                .flag(d.settled);
            match state {
                Some(code) => f.empty_composite(code),
                None => f.null(),
            };
            f.flag(d.batchable).finish(out, payload_len);
            return;
        }
    }
    encode_amqp_frame_general(out, channel, performative, payload_len);
}

/// [`encode_amqp_frame`] through the general writer only.
fn encode_amqp_frame_general(
    out: &mut BytesMut,
    channel: u16,
    performative: &Performative,
    payload_len: usize,
) {
    let start = begin_frame(out, FRAME_TYPE_AMQP, channel);
    performative.encode(out);
    finish_frame(out, start, payload_len);
}

/// The number of bytes `encode_amqp_frame` writes for `performative`
/// (header + performative, not the payload). Lets the engine split a
/// message into frames no larger than the peer's max-frame-size.
pub fn amqp_frame_overhead(performative: &Performative) -> usize {
    overhead_of(|out| performative.encode(out))
}

/// [`encode_amqp_frame`] for a delivery's transfer given as a
/// [`TransferHead`] (same bytes as the equivalent `Transfer`).
pub fn encode_transfer_frame(
    out: &mut BytesMut,
    channel: u16,
    head: &TransferHead<'_>,
    payload_len: usize,
) {
    // A delivery's transfer in one copy from the stack.
    if head
        .delivery_tag
        .is_none_or(|tag| tag.len() <= SMALL_BINARY_MAX)
    {
        SmallFrame::begin(channel, dc::TRANSFER as u8)
            .uint(head.handle)
            .opt_uint(head.delivery_id)
            .opt_binary(head.delivery_tag)
            .opt_uint(head.message_format)
            .opt_bool(head.settled)
            .flag(head.more)
            .finish(out, payload_len);
        return;
    }
    let start = begin_frame(out, FRAME_TYPE_AMQP, channel);
    head.encode(out);
    finish_frame(out, start, payload_len);
}

/// [`amqp_frame_overhead`] of a [`TransferHead`]: what
/// [`encode_transfer_frame`] writes before the payload.
pub fn transfer_frame_overhead(head: &TransferHead<'_>) -> usize {
    overhead_of(|out| head.encode(out))
}

/// Frame header plus what `encode` writes.
fn overhead_of(encode: impl FnOnce(&mut BytesMut)) -> usize {
    thread_local! {
        // Reused so that asking costs one encode into warm memory, no
        // allocation; performatives are small.
        static SCRATCH: RefCell<BytesMut> = RefCell::new(BytesMut::with_capacity(256));
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.clear();
        encode(&mut scratch);
        FRAME_HEADER_BYTES + scratch.len()
    })
}

/// Append a whole SASL frame to `out`.
pub fn encode_sasl_frame(out: &mut BytesMut, frame: &SaslFrame) {
    let start = begin_frame(out, FRAME_TYPE_SASL, 0);
    frame.encode(out);
    finish_frame(out, start, 0);
}

/// Append an empty AMQP frame (a heartbeat) on channel 0 to `out`.
pub fn encode_empty_frame(out: &mut BytesMut) {
    out.extend_from_slice(&[0, 0, 0, 8, 2, 0, 0, 0]);
}

#[cfg(test)]
#[path = "frame_small_tests.rs"]
mod small_tests;

/// A frame and its performative are moved by value, once per message,
/// from the decoder through the connection loop to the link's handler.
/// At 128 bytes or less (x86-64) the compiler moves them with a few vector
/// stores; above that with a call to `memcpy`, which it did when a
/// transfer held its rare delivery state inline (frames of 176 bytes).
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn a_frame_is_small_enough_to_move_inline() {
    use super::performative::Performative;
    assert!(
        std::mem::size_of::<Performative>() <= 88,
        "{}",
        std::mem::size_of::<Performative>()
    );
    assert!(
        std::mem::size_of::<Frame>() <= 128,
        "{}",
        std::mem::size_of::<Frame>()
    );
}
