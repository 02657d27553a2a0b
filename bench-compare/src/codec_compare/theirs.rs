//! The other side: serde_amqp 0.18 with the fe2o3-amqp-types 0.18 types,
//! used the way fe2o3-amqp 0.18 itself uses them. Decoding a frame is
//! fe2o3-amqp's own `FrameDecoder` (after the 4-byte length that its
//! `LengthDelimitedCodec` strips), a message is decoded with
//! `DecodeIntoMessage` over a `SliceReader`, as its receiver does. Encoding
//! writes the same 8-byte frame header and serializes the performative (and
//! the message) straight into the output buffer; fe2o3-amqp's own frame
//! encoder first serializes a transfer into a scratch buffer, which would
//! cost it one more allocation per frame than measured here.

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, BufMut, BytesMut};
use fe2o3_amqp::frames::amqp::{Frame, FrameBody, FrameDecoder};
use fe2o3_amqp_types::definitions::{DeliveryTag, Handle, Role};
use fe2o3_amqp_types::messaging::message::{__private::Serializable, DecodeIntoMessage};
use fe2o3_amqp_types::messaging::{
    Accepted, ApplicationProperties, Body, Data, DeliveryState, Header, Message, MessageId,
    Priority, Properties,
};
use fe2o3_amqp_types::performatives::{Disposition, Transfer};
use fe2o3_amqp_types::primitives::SimpleValue;
use serde::Serialize;
use serde_amqp::lazy::LazyValue;
use serde_amqp::primitives::{Binary, Symbol, Timestamp};
use serde_amqp::read::{Read, SliceReader};
use serde_amqp::ser::Serializer;
use serde_amqp::Value;
use tokio_util::codec::Decoder;

use super::canonical::{
    hex, pad_properties, DispositionFields, FullTransfer, HeaderFields, MessageFields,
    ScannedTransfer, TransferFields,
};
use super::fixture as fx;

/// The message type fe2o3-amqp's receiver decodes into when the
/// application takes any body.
pub type AnyMessage = Message<Body<Value>>;

/// The fixture message in fe2o3-amqp-types, built once.
pub struct TheirMessage {
    message: Message<Data>,
}

fn header() -> Header {
    Header {
        durable: fx::DURABLE,
        priority: Priority(fx::PRIORITY),
        ttl: Some(fx::TTL_MS),
        first_acquirer: false,
        delivery_count: 0,
    }
}

fn properties() -> Properties {
    Properties {
        message_id: Some(MessageId::String(fx::MESSAGE_ID.to_owned())),
        user_id: None,
        to: Some(fx::TO.to_owned()),
        subject: Some(fx::SUBJECT.to_owned()),
        reply_to: Some(fx::REPLY_TO.to_owned()),
        correlation_id: Some(MessageId::Ulong(fx::CORRELATION_ID)),
        content_type: Some(Symbol::from(fx::CONTENT_TYPE)),
        content_encoding: None,
        absolute_expiry_time: None,
        creation_time: Some(Timestamp::from_milliseconds(fx::CREATION_TIME_MS)),
        group_id: None,
        group_sequence: None,
        reply_to_group_id: None,
    }
}

impl TheirMessage {
    /// The fixture message with a data body of `body_len` bytes.
    pub fn new(body_len: usize) -> TheirMessage {
        let application_properties = ApplicationProperties::builder()
            .insert("tenant", fx::APP_TENANT)
            .insert("region", fx::APP_REGION)
            .insert("seq", fx::APP_SEQ)
            .insert("retry", fx::APP_RETRY)
            .build();
        let message = Message::builder()
            .header(header())
            .properties(properties())
            .application_properties(application_properties)
            .data(Binary::from(fx::body(body_len)))
            .build();
        TheirMessage { message }
    }

    /// The transfer performative, built per delivery (the tag is an owned
    /// `Vec`, as the type requires).
    pub fn transfer(&self) -> Transfer {
        Transfer {
            handle: Handle(fx::HANDLE),
            delivery_id: Some(fx::DELIVERY_ID),
            delivery_tag: Some(DeliveryTag::from(fx::DELIVERY_TAG.to_vec())),
            message_format: Some(0),
            settled: Some(false),
            more: false,
            rcv_settle_mode: None,
            state: None,
            resume: false,
            aborted: false,
            batchable: false,
        }
    }

    /// Append a whole transfer frame, the message serialized from its typed
    /// sections (as fe2o3-amqp's sender does before it frames it).
    pub fn encode_full(&self, out: &mut BytesMut) -> Result<()> {
        let start = begin_frame(out);
        let mut ser = Serializer::from(out.writer());
        self.transfer().serialize(&mut ser)?;
        Serializable(&self.message).serialize(&mut ser)?;
        finish_frame(out, start);
        Ok(())
    }

    /// Append a transfer frame in front of already encoded message bytes.
    pub fn encode_hot(&self, out: &mut BytesMut, message: &[u8]) -> Result<()> {
        let start = begin_frame(out);
        self.transfer()
            .serialize(&mut Serializer::from(out.writer()))?;
        out.extend_from_slice(message);
        finish_frame(out, start);
        Ok(())
    }
}

/// The 8-byte AMQP frame header with a size placeholder (fe2o3-amqp writes
/// doff, type and channel; its `LengthDelimitedCodec` adds the size).
fn begin_frame(out: &mut BytesMut) -> usize {
    let start = out.len();
    out.put_u32(0);
    out.put_slice(&[2, 0]);
    out.put_u16(fx::CHANNEL);
    start
}

fn finish_frame(out: &mut BytesMut, start: usize) {
    let size = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// Append the disposition frame (built per call).
pub fn encode_disposition(out: &mut BytesMut) -> Result<()> {
    let start = begin_frame(out);
    let disposition = Disposition {
        role: Role::Receiver,
        first: fx::DISPOSITION_FIRST,
        last: Some(fx::DISPOSITION_LAST),
        settled: true,
        state: Some(DeliveryState::Accepted(Accepted {})),
        batchable: false,
    };
    disposition.serialize(&mut Serializer::from(out.writer()))?;
    finish_frame(out, start);
    Ok(())
}

/// Split one frame off `buf` as fe2o3-amqp's transport does (length
/// prefix, then its `FrameDecoder` on the rest).
fn next_frame(buf: &mut BytesMut) -> Result<Frame> {
    let Some(prefix) = buf.get(..4) else {
        bail!("no frame header in the buffer");
    };
    let size = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if size < 8 || buf.len() < size {
        bail!("no whole frame in the buffer");
    }
    let mut frame = buf.split_to(size);
    frame.advance(4);
    FrameDecoder {}
        .decode(&mut frame)
        .map_err(|e| anyhow!("fe2o3 frame decoder: {e}"))?
        .ok_or_else(|| anyhow!("fe2o3 frame decoder: no frame"))
}

fn payload_of(frame: &Frame) -> Result<&[u8]> {
    match &frame.body {
        FrameBody::Transfer { payload, .. } => Ok(payload),
        other => bail!("expected a transfer frame, got {other:?}"),
    }
}

/// The whole frame and message decoded: what fe2o3-amqp's receiver does.
pub fn decode_full(buf: &mut BytesMut) -> Result<(Frame, AnyMessage)> {
    let frame = next_frame(buf)?;
    let message = Body::<Value>::decode_message_from_reader(SliceReader::new(payload_of(&frame)?))?;
    Ok((frame, message))
}

/// The descriptor code of a section's bytes (`0x00` then a smallulong,
/// ulong or ulong0 descriptor); `None` for a symbolic descriptor.
fn section_code(bytes: &[u8]) -> Option<u64> {
    match bytes {
        [0x00, 0x53, code, ..] => Some(u64::from(*code)),
        [0x00, 0x80, rest @ ..] => rest.get(..8)?.try_into().ok().map(u64::from_be_bytes),
        [0x00, 0x44, ..] => Some(0),
        _ => None,
    }
}

/// The closest serde_amqp offers to the broker's scan: every section read
/// as a `LazyValue` (its bytes, by size prefix, copied out), the header
/// deserialized. The descriptor peek is ours: serde_amqp has no call for it.
pub fn decode_hot(buf: &mut BytesMut) -> Result<(Frame, Option<Header>, usize)> {
    let frame = next_frame(buf)?;
    let mut reader = SliceReader::new(payload_of(&frame)?);
    let mut header = None;
    let mut sections = 0;
    while reader.peek().is_some() {
        let section = LazyValue::from_reader(&mut reader)?;
        if section_code(section.as_slice()) == Some(0x70) {
            header = Some(serde_amqp::from_slice::<Header>(section.as_slice())?);
        }
        sections += 1;
    }
    Ok((frame, header, sections))
}

/// One disposition frame.
pub fn decode_disposition(buf: &mut BytesMut) -> Result<Frame> {
    next_frame(buf)
}

fn transfer_fields(frame: &Frame) -> Result<TransferFields> {
    let FrameBody::Transfer {
        performative: t, ..
    } = &frame.body
    else {
        bail!("expected a transfer frame, got {:?}", frame.body);
    };
    Ok(TransferFields {
        channel: frame.channel,
        handle: t.handle.0,
        delivery_id: t.delivery_id,
        delivery_tag: t.delivery_tag.as_ref().map(|tag| tag.to_vec()),
        message_format: t.message_format,
        settled: t.settled,
        more: t.more,
    })
}

fn header_fields(h: &Header) -> HeaderFields {
    HeaderFields {
        durable: h.durable,
        priority: h.priority.0,
        ttl: h.ttl,
        first_acquirer: h.first_acquirer,
        delivery_count: h.delivery_count,
    }
}

/// What the lazy read found, in neutral form.
pub fn scanned(decoded: &(Frame, Option<Header>, usize)) -> Result<ScannedTransfer> {
    let (frame, header, sections) = decoded;
    Ok(ScannedTransfer {
        transfer: transfer_fields(frame)?,
        header: header.as_ref().map(header_fields),
        sections: *sections,
        message: payload_of(frame)?.to_vec(),
    })
}

fn id_text(id: &MessageId) -> String {
    match id {
        MessageId::Ulong(v) => format!("ulong:{v}"),
        MessageId::Uuid(v) => format!("uuid:{}", hex(v.as_ref())),
        MessageId::Binary(v) => format!("binary:{}", hex(v)),
        MessageId::String(v) => format!("string:{v}"),
    }
}

fn simple_text(value: &SimpleValue) -> Option<String> {
    Some(match value {
        SimpleValue::Null => return None,
        SimpleValue::Bool(v) => format!("bool:{v}"),
        SimpleValue::Ubyte(v) => format!("ubyte:{v}"),
        SimpleValue::Uint(v) => format!("uint:{v}"),
        SimpleValue::Ulong(v) => format!("ulong:{v}"),
        SimpleValue::Int(v) => format!("int:{v}"),
        SimpleValue::Long(v) => format!("long:{v}"),
        SimpleValue::Timestamp(v) => format!("timestamp:{}", v.milliseconds()),
        SimpleValue::Binary(v) => format!("binary:{}", hex(v)),
        SimpleValue::String(v) => format!("string:{v}"),
        SimpleValue::Symbol(v) => format!("symbol:{}", v.as_str()),
        other => format!("other:{other:?}"),
    })
}

fn properties_text(p: &Properties) -> Vec<Option<String>> {
    let string = |s: &Option<String>| s.as_ref().map(|s| format!("string:{s}"));
    let symbol = |s: &Option<Symbol>| s.as_ref().map(|s| format!("symbol:{}", s.as_str()));
    let time = |t: &Option<Timestamp>| {
        t.as_ref()
            .map(|t| format!("timestamp:{}", t.milliseconds()))
    };
    pad_properties(vec![
        p.message_id.as_ref().map(id_text),
        p.user_id.as_ref().map(|v| format!("binary:{}", hex(v))),
        string(&p.to),
        string(&p.subject),
        string(&p.reply_to),
        p.correlation_id.as_ref().map(id_text),
        symbol(&p.content_type),
        symbol(&p.content_encoding),
        time(&p.absolute_expiry_time),
        time(&p.creation_time),
        string(&p.group_id),
        p.group_sequence.map(|v| format!("uint:{v}")),
        string(&p.reply_to_group_id),
    ])
}

/// Every section, in neutral form.
pub fn full(decoded: &(Frame, AnyMessage)) -> Result<FullTransfer> {
    let (frame, m) = decoded;
    let application_properties = match &m.application_properties {
        None => None,
        Some(map) => Some(
            map.iter()
                .map(|(k, v)| {
                    simple_text(v)
                        .map(|v| (k.clone(), v))
                        .ok_or_else(|| anyhow!("application property {k} is null"))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let body = match &m.body {
        Body::Data(batch) => batch.iter().map(|data| data.0.to_vec()).collect(),
        Body::Empty => Vec::new(),
        other => bail!("expected data sections, got {other:?}"),
    };
    Ok(FullTransfer {
        transfer: transfer_fields(frame)?,
        message: MessageFields {
            header: m.header.as_ref().map(header_fields),
            properties: m.properties.as_ref().map(properties_text),
            application_properties,
            body,
        },
    })
}

/// The disposition, in neutral form.
pub fn disposition_fields(frame: &Frame) -> Result<DispositionFields> {
    let FrameBody::Disposition(d) = &frame.body else {
        bail!("expected a disposition frame, got {:?}", frame.body);
    };
    Ok(DispositionFields {
        channel: frame.channel,
        receiver: matches!(d.role, Role::Receiver),
        first: d.first,
        last: d.last,
        settled: d.settled,
        state: d.state.as_ref().map(|s| match s {
            DeliveryState::Accepted(_) => "accepted".to_owned(),
            other => format!("other:{other:?}"),
        }),
        batchable: d.batchable,
    })
}
