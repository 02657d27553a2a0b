//! The nine transport performatives (transport 2.7), decoded field by field
//! from their described lists and encoded with trailing nulls trimmed.

use bytes::{Bytes, BytesMut};

use super::codes::{dc, describe, descriptor_code, fc};
use super::decode::{unexpected, Decoder, ListFields};
use super::definitions::{
    opt_delivery_state, opt_error, opt_rcv_settle_mode, opt_role, opt_snd_settle_mode, opt_source,
    opt_target, DeliveryState, Error, ReceiverSettleMode, Role, SenderSettleMode, Source, Target,
};
use super::encode::{self, CompositeWriter};
use super::error::CodecError;
use super::value::{Fields, Symbol, Value};

/// open (0x10)
#[derive(Debug, Clone, PartialEq)]
pub struct Open {
    /// container-id (mandatory)
    pub container_id: String,
    /// hostname
    pub hostname: Option<String>,
    /// max-frame-size (default u32::MAX)
    pub max_frame_size: u32,
    /// channel-max (default 65535)
    pub channel_max: u16,
    /// idle-time-out in milliseconds
    pub idle_time_out: Option<u32>,
    /// outgoing-locales
    pub outgoing_locales: Vec<Symbol>,
    /// incoming-locales
    pub incoming_locales: Vec<Symbol>,
    /// offered-capabilities
    pub offered_capabilities: Vec<Symbol>,
    /// desired-capabilities
    pub desired_capabilities: Vec<Symbol>,
    /// properties
    pub properties: Option<Fields>,
}

/// begin (0x11)
#[derive(Debug, Clone, PartialEq)]
pub struct Begin {
    /// remote-channel
    pub remote_channel: Option<u16>,
    /// next-outgoing-id (mandatory)
    pub next_outgoing_id: u32,
    /// incoming-window (mandatory)
    pub incoming_window: u32,
    /// outgoing-window (mandatory)
    pub outgoing_window: u32,
    /// handle-max (default u32::MAX)
    pub handle_max: u32,
    /// offered-capabilities
    pub offered_capabilities: Vec<Symbol>,
    /// desired-capabilities
    pub desired_capabilities: Vec<Symbol>,
    /// properties
    pub properties: Option<Fields>,
}

/// attach (0x12)
#[derive(Debug, Clone, PartialEq)]
pub struct Attach {
    /// name (mandatory)
    pub name: String,
    /// handle (mandatory)
    pub handle: u32,
    /// role (mandatory)
    pub role: Role,
    /// snd-settle-mode (default mixed)
    pub snd_settle_mode: SenderSettleMode,
    /// rcv-settle-mode (default first)
    pub rcv_settle_mode: ReceiverSettleMode,
    /// source
    pub source: Option<Source>,
    /// target, or the transaction coordinator (see [`Target::kind`])
    pub target: Option<Target>,
    /// unsettled map, kept raw
    pub unsettled: Option<Vec<(Value, Value)>>,
    /// incomplete-unsettled (default false)
    pub incomplete_unsettled: bool,
    /// initial-delivery-count
    pub initial_delivery_count: Option<u32>,
    /// max-message-size
    pub max_message_size: Option<u64>,
    /// offered-capabilities
    pub offered_capabilities: Vec<Symbol>,
    /// desired-capabilities
    pub desired_capabilities: Vec<Symbol>,
    /// properties
    pub properties: Option<Fields>,
}

/// flow (0x13)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Flow {
    /// next-incoming-id
    pub next_incoming_id: Option<u32>,
    /// incoming-window (mandatory)
    pub incoming_window: u32,
    /// next-outgoing-id (mandatory)
    pub next_outgoing_id: u32,
    /// outgoing-window (mandatory)
    pub outgoing_window: u32,
    /// handle
    pub handle: Option<u32>,
    /// delivery-count
    pub delivery_count: Option<u32>,
    /// link-credit
    pub link_credit: Option<u32>,
    /// available
    pub available: Option<u32>,
    /// drain (default false)
    pub drain: bool,
    /// echo (default false)
    pub echo: bool,
    /// properties
    pub properties: Option<Fields>,
}

/// transfer (0x14); the payload follows the performative in the frame body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transfer {
    /// handle (mandatory)
    pub handle: u32,
    /// delivery-id
    pub delivery_id: Option<u32>,
    /// delivery-tag
    pub delivery_tag: Option<Bytes>,
    /// message-format
    pub message_format: Option<u32>,
    /// settled
    pub settled: Option<bool>,
    /// more (default false)
    pub more: bool,
    /// rcv-settle-mode
    pub rcv_settle_mode: Option<ReceiverSettleMode>,
    /// state: boxed, as a transfer rarely carries one (a transactional
    /// publish, a resumed delivery) and inline it made every transfer,
    /// and so every frame, too big to move without a `memcpy` call
    /// (a test in `frame.rs` checks the size).
    pub state: Option<Box<DeliveryState>>,
    /// resume (default false)
    pub resume: bool,
    /// aborted (default false)
    pub aborted: bool,
    /// batchable (default false)
    pub batchable: bool,
}

/// disposition (0x15)
#[derive(Debug, Clone, PartialEq)]
pub struct Disposition {
    /// role (mandatory)
    pub role: Role,
    /// first (mandatory)
    pub first: u32,
    /// last (defaults to first)
    pub last: Option<u32>,
    /// settled (default false)
    pub settled: bool,
    /// state
    pub state: Option<DeliveryState>,
    /// batchable (default false)
    pub batchable: bool,
}

/// detach (0x16)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Detach {
    /// handle (mandatory)
    pub handle: u32,
    /// closed (default false)
    pub closed: bool,
    /// error
    pub error: Option<Error>,
}

/// end (0x17)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct End {
    /// error
    pub error: Option<Error>,
}

/// close (0x18)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Close {
    /// error
    pub error: Option<Error>,
}

/// Any transport performative.
#[derive(Debug, Clone, PartialEq)]
pub enum Performative {
    /// open
    Open(Box<Open>),
    /// begin
    Begin(Box<Begin>),
    /// attach
    Attach(Box<Attach>),
    /// flow
    Flow(Flow),
    /// transfer
    Transfer(Transfer),
    /// disposition
    Disposition(Disposition),
    /// detach
    Detach(Detach),
    /// end
    End(End),
    /// close
    Close(Close),
}

impl Performative {
    /// Decode a performative (descriptor + list) from the front of `input`,
    /// advancing it past the performative; what remains is the payload.
    pub fn decode(input: &mut Bytes) -> Result<Performative, CodecError> {
        // The transfer and disposition of every message, in the encoding
        // peers use, without the general decoder's per-field machinery
        // (same value; anything else goes the general way).
        if let Some(performative) = crate::codec::decode::fast::decode(input) {
            return Ok(performative);
        }
        Self::decode_general(input)
    }

    /// [`Performative::decode`] without its fast path (which must agree
    /// with this; its tests compare the two).
    pub(crate) fn decode_general(input: &mut Bytes) -> Result<Performative, CodecError> {
        let mut d = Decoder::new(input);
        let descriptor = d
            .opt_descriptor()?
            .ok_or(unexpected("performative", fc::NULL))?;
        Ok(match descriptor_code(&descriptor) {
            Some(dc::OPEN) => Performative::Open(Box::new(d.composite(decode_open)?)),
            Some(dc::BEGIN) => Performative::Begin(Box::new(d.composite(decode_begin)?)),
            Some(dc::ATTACH) => Performative::Attach(Box::new(d.composite(decode_attach)?)),
            Some(dc::FLOW) => Performative::Flow(d.composite(decode_flow)?),
            Some(dc::TRANSFER) => Performative::Transfer(d.composite(decode_transfer)?),
            Some(dc::DISPOSITION) => Performative::Disposition(d.composite(decode_disposition)?),
            Some(dc::DETACH) => Performative::Detach(d.composite(decode_detach)?),
            Some(dc::END) => Performative::End(End {
                error: d.composite(decode_error_only)?,
            }),
            Some(dc::CLOSE) => Performative::Close(Close {
                error: d.composite(decode_error_only)?,
            }),
            _ => return Err(CodecError::UnknownDescriptor(describe(&descriptor))),
        })
    }

    /// Append the encoding (descriptor + list, trailing defaults trimmed).
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Performative::Open(open) => encode_open(open, out),
            Performative::Begin(begin) => encode_begin(begin, out),
            Performative::Attach(attach) => encode_attach(attach, out),
            Performative::Flow(flow) => encode_flow(flow, out),
            Performative::Transfer(transfer) => encode_transfer(transfer, out),
            Performative::Disposition(disposition) => encode_disposition(disposition, out),
            Performative::Detach(detach) => {
                let mut w = CompositeWriter::begin(out, dc::DETACH);
                w.uint(detach.handle).flag(detach.closed);
                w.opt(detach.error.as_ref(), |out, e| e.encode(out));
                w.finish();
            }
            Performative::End(End { error }) | Performative::Close(Close { error }) => {
                let code = if matches!(self, Performative::End(_)) {
                    dc::END
                } else {
                    dc::CLOSE
                };
                let mut w = CompositeWriter::begin(out, code);
                w.opt(error.as_ref(), |out, e| e.encode(out));
                w.finish();
            }
        }
    }
}

fn decode_open(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Open, CodecError> {
    Ok(Open {
        container_id: d.required(l, Decoder::opt_string, "container-id")?,
        hostname: d.field(l, Decoder::opt_string)?,
        max_frame_size: d.field(l, Decoder::opt_uint)?.unwrap_or(u32::MAX),
        channel_max: d.field(l, Decoder::opt_ushort)?.unwrap_or(u16::MAX),
        idle_time_out: d.field(l, Decoder::opt_uint)?,
        outgoing_locales: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        incoming_locales: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        offered_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        desired_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        properties: d.field(l, Decoder::opt_fields)?,
    })
}

fn encode_open(open: &Open, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::OPEN);
    w.string(&open.container_id)
        .opt_string(open.hostname.as_deref())
        .uint_default(open.max_frame_size, u32::MAX)
        .ushort_default(open.channel_max, u16::MAX)
        .opt_uint(open.idle_time_out)
        .symbols(&open.outgoing_locales)
        .symbols(&open.incoming_locales)
        .symbols(&open.offered_capabilities)
        .symbols(&open.desired_capabilities)
        .opt_fields(open.properties.as_ref());
    w.finish();
}

fn decode_begin(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Begin, CodecError> {
    Ok(Begin {
        remote_channel: d.field(l, Decoder::opt_ushort)?,
        next_outgoing_id: d.required(l, Decoder::opt_uint, "next-outgoing-id")?,
        incoming_window: d.required(l, Decoder::opt_uint, "incoming-window")?,
        outgoing_window: d.required(l, Decoder::opt_uint, "outgoing-window")?,
        handle_max: d.field(l, Decoder::opt_uint)?.unwrap_or(u32::MAX),
        offered_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        desired_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        properties: d.field(l, Decoder::opt_fields)?,
    })
}

fn encode_begin(begin: &Begin, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::BEGIN);
    w.opt_ushort(begin.remote_channel)
        .uint(begin.next_outgoing_id)
        .uint(begin.incoming_window)
        .uint(begin.outgoing_window)
        .uint_default(begin.handle_max, u32::MAX)
        .symbols(&begin.offered_capabilities)
        .symbols(&begin.desired_capabilities)
        .opt_fields(begin.properties.as_ref());
    w.finish();
}

fn decode_attach(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Attach, CodecError> {
    Ok(Attach {
        name: d.required(l, Decoder::opt_string, "name")?,
        handle: d.required(l, Decoder::opt_uint, "handle")?,
        role: d.required(l, opt_role, "role")?,
        snd_settle_mode: d.field(l, opt_snd_settle_mode)?.unwrap_or_default(),
        rcv_settle_mode: d.field(l, opt_rcv_settle_mode)?.unwrap_or_default(),
        source: d.field(l, opt_source)?,
        target: d.field(l, opt_target)?,
        unsettled: d.field(l, Decoder::opt_map)?,
        incomplete_unsettled: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        initial_delivery_count: d.field(l, Decoder::opt_uint)?,
        max_message_size: d.field(l, Decoder::opt_ulong)?,
        offered_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        desired_capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        properties: d.field(l, Decoder::opt_fields)?,
    })
}

fn encode_attach(attach: &Attach, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::ATTACH);
    w.string(&attach.name)
        .uint(attach.handle)
        .boolean(attach.role.as_bool())
        .ubyte_default(
            attach.snd_settle_mode.as_u8(),
            SenderSettleMode::default().as_u8(),
        )
        .ubyte_default(
            attach.rcv_settle_mode.as_u8(),
            ReceiverSettleMode::default().as_u8(),
        )
        .opt(attach.source.as_ref(), |out, s| s.encode(out))
        .opt(attach.target.as_ref(), |out, t| t.encode(out))
        .opt_map(attach.unsettled.as_ref())
        .flag(attach.incomplete_unsettled)
        .opt_uint(attach.initial_delivery_count)
        .opt_ulong(attach.max_message_size)
        .symbols(&attach.offered_capabilities)
        .symbols(&attach.desired_capabilities)
        .opt_fields(attach.properties.as_ref());
    w.finish();
}

fn decode_flow(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Flow, CodecError> {
    Ok(Flow {
        next_incoming_id: d.field(l, Decoder::opt_uint)?,
        incoming_window: d.required(l, Decoder::opt_uint, "incoming-window")?,
        next_outgoing_id: d.required(l, Decoder::opt_uint, "next-outgoing-id")?,
        outgoing_window: d.required(l, Decoder::opt_uint, "outgoing-window")?,
        handle: d.field(l, Decoder::opt_uint)?,
        delivery_count: d.field(l, Decoder::opt_uint)?,
        link_credit: d.field(l, Decoder::opt_uint)?,
        available: d.field(l, Decoder::opt_uint)?,
        drain: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        echo: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        properties: d.field(l, Decoder::opt_fields)?,
    })
}

fn encode_flow(flow: &Flow, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::FLOW);
    w.opt_uint(flow.next_incoming_id)
        .uint(flow.incoming_window)
        .uint(flow.next_outgoing_id)
        .uint(flow.outgoing_window)
        .opt_uint(flow.handle)
        .opt_uint(flow.delivery_count)
        .opt_uint(flow.link_credit)
        .opt_uint(flow.available)
        .flag(flow.drain)
        .flag(flow.echo)
        .opt_fields(flow.properties.as_ref());
    w.finish();
}

fn decode_transfer(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Transfer, CodecError> {
    Ok(Transfer {
        handle: d.required(l, Decoder::opt_uint, "handle")?,
        delivery_id: d.field(l, Decoder::opt_uint)?,
        delivery_tag: d.field(l, Decoder::opt_binary)?,
        message_format: d.field(l, Decoder::opt_uint)?,
        settled: d.field(l, Decoder::opt_bool)?,
        more: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        rcv_settle_mode: d.field(l, opt_rcv_settle_mode)?,
        state: d.field(l, opt_delivery_state)?.map(Box::new),
        resume: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        aborted: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        batchable: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
    })
}

fn encode_transfer(transfer: &Transfer, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::TRANSFER);
    w.uint(transfer.handle)
        .opt_uint(transfer.delivery_id)
        .opt_binary(transfer.delivery_tag.as_ref())
        .opt_uint(transfer.message_format)
        .opt_bool(transfer.settled)
        .flag(transfer.more)
        .opt(transfer.rcv_settle_mode, |out, mode| {
            encode::put_ubyte(out, mode.as_u8())
        })
        .opt(transfer.state.as_ref(), |out, state| state.encode(out))
        .flag(transfer.resume)
        .flag(transfer.aborted)
        .flag(transfer.batchable);
    w.finish();
}

fn decode_disposition(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Disposition, CodecError> {
    Ok(Disposition {
        role: d.required(l, opt_role, "role")?,
        first: d.required(l, Decoder::opt_uint, "first")?,
        last: d.field(l, Decoder::opt_uint)?,
        settled: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        state: d.field(l, opt_delivery_state)?,
        batchable: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
    })
}

fn encode_disposition(disposition: &Disposition, out: &mut BytesMut) {
    let mut w = CompositeWriter::begin(out, dc::DISPOSITION);
    w.boolean(disposition.role.as_bool())
        .uint(disposition.first)
        .opt_uint(disposition.last)
        .flag(disposition.settled)
        .opt(disposition.state.as_ref(), |out, state| state.encode(out))
        .flag(disposition.batchable);
    w.finish();
}

fn decode_detach(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Detach, CodecError> {
    Ok(Detach {
        handle: d.required(l, Decoder::opt_uint, "handle")?,
        closed: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
        error: d.field(l, opt_error)?,
    })
}

/// The single `error` field of end and close.
fn decode_error_only(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Option<Error>, CodecError> {
    d.field(l, opt_error)
}
