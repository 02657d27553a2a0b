//! Our side of the comparison: the broker's own codec (`broker::codec`)
//! doing what the broker does per transfer (split a frame off the receive
//! buffer, decode the performative, scan the message; write a transfer in
//! front of the stored message bytes), a full decode and encode of every
//! section through the same codec's public value API, and conversion of
//! what it decoded into the neutral forms of `canonical.rs`.

use anyhow::{anyhow, bail, Context, Result};
use broker::codec::frame::{decode_frame, encode_amqp_frame};
use broker::codec::{
    DeliveryState, Descriptor, Disposition, Frame, FrameBody, Header, MessageView, Performative,
    Role, Symbol, Transfer, Value,
};
use bytes::{Bytes, BytesMut};

use super::canonical::{
    hex, pad_properties, DispositionFields, FullTransfer, HeaderFields, MessageFields,
    ScannedTransfer, TransferFields,
};
use super::fixture as fx;

/// max-frame-size the decoders are given (the broker's is negotiated; any
/// bound above the frames here measures the same).
pub const MAX_FRAME_SIZE: u32 = 1 << 20;

/// Section descriptor codes (messaging 3.2).
const HEADER: u64 = 0x70;
const PROPERTIES: u64 = 0x73;
const APPLICATION_PROPERTIES: u64 = 0x74;
const DATA: u64 = 0x75;

/// The fixture message in our codec's types, built once; what is encoded
/// per operation is encoded from these.
pub struct OurMessage {
    header: Header,
    /// properties, application-properties and data, as described values.
    sections: [Value; 3],
    tag: Bytes,
}

fn described(code: u64, value: Value) -> Value {
    Value::Described(Box::new((Descriptor::Code(code), value)))
}

fn string(s: &str) -> Value {
    Value::String(s.to_owned())
}

impl OurMessage {
    /// The fixture message with a data body of `body_len` bytes.
    pub fn new(body_len: usize) -> OurMessage {
        let header = Header {
            durable: fx::DURABLE,
            priority: fx::PRIORITY,
            ttl: Some(fx::TTL_MS),
            first_acquirer: false,
            delivery_count: 0,
        };
        let properties = Value::List(vec![
            string(fx::MESSAGE_ID),
            Value::Null,
            string(fx::TO),
            string(fx::SUBJECT),
            string(fx::REPLY_TO),
            Value::Ulong(fx::CORRELATION_ID),
            Value::Symbol(Symbol::from(fx::CONTENT_TYPE)),
            Value::Null,
            Value::Null,
            Value::Timestamp(fx::CREATION_TIME_MS),
        ]);
        let application_properties = Value::Map(vec![
            (string("tenant"), string(fx::APP_TENANT)),
            (string("region"), string(fx::APP_REGION)),
            (string("seq"), Value::Long(fx::APP_SEQ)),
            (string("retry"), Value::Bool(fx::APP_RETRY)),
        ]);
        let body = Value::Binary(Bytes::from(fx::body(body_len)));
        OurMessage {
            header,
            sections: [
                described(PROPERTIES, properties),
                described(APPLICATION_PROPERTIES, application_properties),
                described(DATA, body),
            ],
            tag: Bytes::copy_from_slice(&fx::DELIVERY_TAG),
        }
    }

    /// The transfer performative, built per delivery as the broker's
    /// session does (`engine/session.rs`: the tag is a `Bytes` clone).
    pub fn transfer(&self) -> Performative {
        Performative::Transfer(Transfer {
            handle: fx::HANDLE,
            delivery_id: Some(fx::DELIVERY_ID),
            delivery_tag: Some(self.tag.clone()),
            message_format: Some(0),
            settled: Some(false),
            ..Transfer::default()
        })
    }

    /// Append a whole transfer frame whose message is encoded from the
    /// typed sections (what a client does when it publishes).
    pub fn encode_full(&self, out: &mut BytesMut) {
        let start = out.len();
        // Announce no payload, write the sections, then patch the size:
        // our frame writer expects the payload's length up front.
        encode_amqp_frame(out, fx::CHANNEL, &self.transfer(), 0);
        self.header.encode(out);
        for section in &self.sections {
            section.encode(out);
        }
        let size = (out.len() - start) as u32;
        out[start..start + 4].copy_from_slice(&size.to_be_bytes());
    }

    /// Append a transfer frame in front of already encoded message bytes,
    /// as the broker does when it delivers a stored message (the outbox
    /// copies a payload up to 2 KiB and hands a larger one to a vectored
    /// write; here both sides copy it).
    pub fn encode_hot(&self, out: &mut BytesMut, message: &[u8]) {
        encode_amqp_frame(out, fx::CHANNEL, &self.transfer(), message.len());
        out.extend_from_slice(message);
    }
}

/// The consumer's disposition in our types.
pub fn disposition() -> Performative {
    Performative::Disposition(Disposition {
        role: Role::Receiver,
        first: fx::DISPOSITION_FIRST,
        last: Some(fx::DISPOSITION_LAST),
        settled: true,
        state: Some(DeliveryState::Accepted),
        batchable: false,
    })
}

/// Append the disposition frame (built per call, as the broker does).
pub fn encode_disposition(out: &mut BytesMut) {
    encode_amqp_frame(out, fx::CHANNEL, &disposition(), 0);
}

fn next_frame(buf: &mut BytesMut) -> Result<Frame> {
    decode_frame(buf, MAX_FRAME_SIZE)?.ok_or_else(|| anyhow!("no whole frame in the buffer"))
}

fn transfer_of(frame: &Frame) -> Result<(&Transfer, &Bytes)> {
    match &frame.body {
        FrameBody::Amqp {
            performative: Performative::Transfer(transfer),
            payload,
        } => Ok((transfer, payload)),
        other => bail!("expected a transfer frame, got {other:?}"),
    }
}

/// The broker's hot path for one received transfer: split the frame off
/// the receive buffer, decode the performative (the payload stays a slice
/// of the buffer) and scan the message, decoding only its header.
pub fn decode_hot(buf: &mut BytesMut) -> Result<(Frame, MessageView)> {
    let frame = next_frame(buf)?;
    let view = MessageView::scan(transfer_of(&frame)?.1)?;
    Ok((frame, view))
}

/// The same frame with every section decoded, through our codec's value
/// API (strings owned, binaries as slices of the buffer).
pub fn decode_full(buf: &mut BytesMut) -> Result<(Frame, Vec<Value>)> {
    let frame = next_frame(buf)?;
    let mut rest = transfer_of(&frame)?.1.clone();
    let mut sections = Vec::with_capacity(4);
    while !rest.is_empty() {
        sections.push(Value::decode(&mut rest)?);
    }
    Ok((frame, sections))
}

/// One disposition frame.
pub fn decode_disposition(buf: &mut BytesMut) -> Result<Frame> {
    next_frame(buf)
}

fn transfer_fields(frame: &Frame) -> Result<TransferFields> {
    let (t, _) = transfer_of(frame)?;
    Ok(TransferFields {
        channel: frame.channel,
        handle: t.handle,
        delivery_id: t.delivery_id,
        delivery_tag: t.delivery_tag.as_ref().map(|b| b.to_vec()),
        message_format: t.message_format,
        settled: t.settled,
        more: t.more,
    })
}

fn header_fields(h: &Header) -> HeaderFields {
    HeaderFields {
        durable: h.durable,
        priority: h.priority,
        ttl: h.ttl,
        first_acquirer: h.first_acquirer,
        delivery_count: h.delivery_count,
    }
}

/// What the hot path found, in neutral form.
pub fn scanned(decoded: &(Frame, MessageView)) -> Result<ScannedTransfer> {
    let (frame, view) = decoded;
    Ok(ScannedTransfer {
        transfer: transfer_fields(frame)?,
        header: view.header.as_ref().map(header_fields),
        sections: view.n_sections,
        message: transfer_of(frame)?.1.to_vec(),
    })
}

/// A value as `type:text`; `None` for null.
pub fn text(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(v) => format!("bool:{v}"),
        Value::Ubyte(v) => format!("ubyte:{v}"),
        Value::Uint(v) => format!("uint:{v}"),
        Value::Ulong(v) => format!("ulong:{v}"),
        Value::Int(v) => format!("int:{v}"),
        Value::Long(v) => format!("long:{v}"),
        Value::Timestamp(v) => format!("timestamp:{v}"),
        Value::Uuid(v) => format!("uuid:{}", hex(v)),
        Value::Binary(v) => format!("binary:{}", hex(v)),
        Value::String(v) => format!("string:{v}"),
        Value::Symbol(v) => format!("symbol:{}", v.as_str()),
        other => format!("other:{other:?}"),
    })
}

fn list_field(fields: &[Value], i: usize) -> &Value {
    fields.get(i).unwrap_or(&Value::Null)
}

/// The header section from its generic list (defaults per messaging 3.2.1).
fn header_from_list(fields: &[Value]) -> Result<HeaderFields> {
    let flag = |i| match list_field(fields, i) {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        other => Err(anyhow!("header field {i}: {other:?}")),
    };
    let uint = |i| match list_field(fields, i) {
        Value::Null => Ok(None),
        Value::Uint(v) => Ok(Some(*v)),
        other => Err(anyhow!("header field {i}: {other:?}")),
    };
    let priority = match list_field(fields, 1) {
        Value::Null => 4,
        Value::Ubyte(v) => *v,
        other => bail!("header priority: {other:?}"),
    };
    Ok(HeaderFields {
        durable: flag(0)?,
        priority,
        ttl: uint(2)?,
        first_acquirer: flag(3)?,
        delivery_count: uint(4)?.unwrap_or(0),
    })
}

/// Every section, in neutral form.
pub fn full(decoded: &(Frame, Vec<Value>)) -> Result<FullTransfer> {
    let (frame, sections) = decoded;
    let mut message = MessageFields {
        header: None,
        properties: None,
        application_properties: None,
        body: Vec::new(),
    };
    for section in sections {
        let Value::Described(described) = section else {
            bail!("section is not a described value: {section:?}");
        };
        let (Descriptor::Code(code), value) = &**described else {
            bail!("section with a symbolic descriptor");
        };
        match (*code, value) {
            (HEADER, Value::List(fields)) => message.header = Some(header_from_list(fields)?),
            (PROPERTIES, Value::List(fields)) => {
                message.properties = Some(pad_properties(fields.iter().map(text).collect()));
            }
            (APPLICATION_PROPERTIES, Value::Map(entries)) => {
                let pairs = entries.iter().map(|(k, v)| match (k, text(v)) {
                    (Value::String(k), Some(v)) => Ok((k.clone(), v)),
                    other => Err(anyhow!("application property {other:?}")),
                });
                message.application_properties = Some(pairs.collect::<Result<_>>()?);
            }
            (DATA, Value::Binary(bytes)) => message.body.push(bytes.to_vec()),
            (code, value) => bail!("unexpected section {code:#x}: {value:?}"),
        }
    }
    Ok(FullTransfer {
        transfer: transfer_fields(frame).context("the transfer")?,
        message,
    })
}

/// The disposition, in neutral form.
pub fn disposition_fields(frame: &Frame) -> Result<DispositionFields> {
    let FrameBody::Amqp {
        performative: Performative::Disposition(d),
        ..
    } = &frame.body
    else {
        bail!("expected a disposition frame, got {:?}", frame.body);
    };
    Ok(DispositionFields {
        channel: frame.channel,
        receiver: d.role == Role::Receiver,
        first: d.first,
        last: d.last,
        settled: d.settled,
        state: d.state.as_ref().map(|s| match s {
            DeliveryState::Accepted => "accepted".to_owned(),
            other => format!("other:{other:?}"),
        }),
        batchable: d.batchable,
    })
}
