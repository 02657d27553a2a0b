//! Transport and messaging definitions shared by the performatives: roles,
//! settle modes, the error type, delivery states (outcomes), source and
//! target terminus, and the error-condition symbols.

use bytes::{Bytes, BytesMut};

use super::error::CodecError;
use super::value::{Fields, Symbol, Value};

/// Error-condition symbols from the AMQP 1.0 spec (transport 2.8.15-2.8.18).
pub mod condition {
    /// amqp:internal-error
    pub const INTERNAL_ERROR: &str = "amqp:internal-error";
    /// amqp:not-found
    pub const NOT_FOUND: &str = "amqp:not-found";
    /// amqp:unauthorized-access
    pub const UNAUTHORIZED_ACCESS: &str = "amqp:unauthorized-access";
    /// amqp:decode-error
    pub const DECODE_ERROR: &str = "amqp:decode-error";
    /// amqp:resource-limit-exceeded
    pub const RESOURCE_LIMIT_EXCEEDED: &str = "amqp:resource-limit-exceeded";
    /// amqp:not-allowed
    pub const NOT_ALLOWED: &str = "amqp:not-allowed";
    /// amqp:invalid-field
    pub const INVALID_FIELD: &str = "amqp:invalid-field";
    /// amqp:not-implemented
    pub const NOT_IMPLEMENTED: &str = "amqp:not-implemented";
    /// amqp:resource-locked
    pub const RESOURCE_LOCKED: &str = "amqp:resource-locked";
    /// amqp:precondition-failed
    pub const PRECONDITION_FAILED: &str = "amqp:precondition-failed";
    /// amqp:resource-deleted
    pub const RESOURCE_DELETED: &str = "amqp:resource-deleted";
    /// amqp:illegal-state
    pub const ILLEGAL_STATE: &str = "amqp:illegal-state";
    /// amqp:frame-size-too-small
    pub const FRAME_SIZE_TOO_SMALL: &str = "amqp:frame-size-too-small";
    /// amqp:connection:forced
    pub const CONNECTION_FORCED: &str = "amqp:connection:forced";
    /// amqp:connection:framing-error
    pub const FRAMING_ERROR: &str = "amqp:connection:framing-error";
    /// amqp:connection:redirect
    pub const CONNECTION_REDIRECT: &str = "amqp:connection:redirect";
    /// amqp:session:window-violation
    pub const WINDOW_VIOLATION: &str = "amqp:session:window-violation";
    /// amqp:session:errant-link
    pub const ERRANT_LINK: &str = "amqp:session:errant-link";
    /// amqp:session:handle-in-use
    pub const HANDLE_IN_USE: &str = "amqp:session:handle-in-use";
    /// amqp:session:unattached-handle
    pub const UNATTACHED_HANDLE: &str = "amqp:session:unattached-handle";
    /// amqp:link:detach-forced
    pub const DETACH_FORCED: &str = "amqp:link:detach-forced";
    /// amqp:link:transfer-limit-exceeded
    pub const TRANSFER_LIMIT_EXCEEDED: &str = "amqp:link:transfer-limit-exceeded";
    /// amqp:link:message-size-exceeded
    pub const MESSAGE_SIZE_EXCEEDED: &str = "amqp:link:message-size-exceeded";
    /// amqp:link:redirect
    pub const LINK_REDIRECT: &str = "amqp:link:redirect";
    /// amqp:link:stolen
    pub const STOLEN: &str = "amqp:link:stolen";
}

/// Link role; encoded as a boolean (false = sender, true = receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The endpoint sends messages on this link.
    Sender,
    /// The endpoint receives messages on this link.
    Receiver,
}

/// sender-settle-mode; encoded as a ubyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SenderSettleMode {
    /// 0: the sender sends all deliveries unsettled.
    Unsettled,
    /// 1: the sender sends all deliveries settled.
    Settled,
    /// 2: the sender may send either (the default).
    #[default]
    Mixed,
}

/// receiver-settle-mode; encoded as a ubyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceiverSettleMode {
    /// 0: the receiver settles spontaneously (the default).
    #[default]
    First,
    /// 1: the receiver settles only after the sender settles.
    Second,
}

/// The `error` composite (amqp:error:list, 0x1d).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Error {
    /// Mandatory error condition, e.g. `amqp:not-found`.
    pub condition: Symbol,
    /// Human-readable description.
    pub description: Option<String>,
    /// Extra information.
    pub info: Option<Fields>,
}

impl Error {
    /// An error with a condition and a description.
    pub fn new(condition: &str, description: impl Into<String>) -> Self {
        Error {
            condition: Symbol::from(condition),
            description: Some(description.into()),
            info: None,
        }
    }
}

/// Delivery states: the terminal outcomes plus `received` (messaging 3.4).
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryState {
    /// amqp:received:list (0x23)
    Received {
        /// section-number
        section_number: u32,
        /// section-offset
        section_offset: u64,
    },
    /// amqp:accepted:list (0x24)
    Accepted,
    /// amqp:rejected:list (0x25)
    Rejected {
        /// Why the message was rejected.
        error: Option<Error>,
    },
    /// amqp:released:list (0x26)
    Released,
    /// amqp:modified:list (0x27)
    Modified {
        /// delivery-failed: count this as a failed delivery attempt.
        delivery_failed: bool,
        /// undeliverable-here: do not deliver again to this link.
        undeliverable_here: bool,
        /// Annotations to merge into the message.
        message_annotations: Option<Fields>,
    },
    /// Any other described delivery state (e.g. transactional-state), kept
    /// as a value so that it can be refused cleanly.
    Other(Value),
}

impl DeliveryState {
    /// Decode a delivery state (a described list) from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<DeliveryState, CodecError> {
        let _ = input;
        unimplemented!("codec: DeliveryState::decode")
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let _ = out;
        unimplemented!("codec: DeliveryState::encode")
    }
}

/// The source terminus (amqp:source:list, 0x28).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Source {
    /// address
    pub address: Option<String>,
    /// durable (terminus-durability, default 0 = none)
    pub durable: u32,
    /// expiry-policy (default session-end)
    pub expiry_policy: Option<Symbol>,
    /// timeout in seconds (default 0)
    pub timeout: u32,
    /// dynamic (default false)
    pub dynamic: bool,
    /// dynamic-node-properties
    pub dynamic_node_properties: Option<Fields>,
    /// distribution-mode (`move` or `copy`)
    pub distribution_mode: Option<Symbol>,
    /// filter set
    pub filter: Option<Fields>,
    /// default-outcome, kept raw
    pub default_outcome: Option<Value>,
    /// outcomes (multiple)
    pub outcomes: Vec<Symbol>,
    /// capabilities (multiple)
    pub capabilities: Vec<Symbol>,
}

/// The target terminus (amqp:target:list, 0x29).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Target {
    /// address
    pub address: Option<String>,
    /// durable (terminus-durability, default 0 = none)
    pub durable: u32,
    /// expiry-policy (default session-end)
    pub expiry_policy: Option<Symbol>,
    /// timeout in seconds (default 0)
    pub timeout: u32,
    /// dynamic (default false)
    pub dynamic: bool,
    /// dynamic-node-properties
    pub dynamic_node_properties: Option<Fields>,
    /// capabilities (multiple)
    pub capabilities: Vec<Symbol>,
}
