//! The nine transport performatives (transport 2.7), decoded field by field
//! from their described lists and encoded with trailing nulls trimmed.

use bytes::{Bytes, BytesMut};

use super::definitions::{
    DeliveryState, Error, ReceiverSettleMode, Role, SenderSettleMode, Source, Target,
};
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
    /// target; a coordinator target (transactions) is a decode error here
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
    /// state
    pub state: Option<DeliveryState>,
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
        let _ = input;
        unimplemented!("codec: Performative::decode")
    }

    /// Append the encoding (descriptor + list, trailing defaults trimmed).
    pub fn encode(&self, out: &mut BytesMut) {
        let _ = out;
        unimplemented!("codec: Performative::encode")
    }
}
