//! Transport and messaging definitions shared by the performatives: roles,
//! settle modes, the error type, delivery states (outcomes), source and
//! target terminus, and the error-condition symbols.

use bytes::{Bytes, BytesMut};

use super::codes::{dc, describe, descriptor_code, fc};
use super::decode::{unexpected, Decoder, ListFields};
use super::encode::{self, CompositeWriter};
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
    /// amqp:transaction:unknown-id
    pub const TRANSACTION_UNKNOWN_ID: &str = "amqp:transaction:unknown-id";
    /// amqp:transaction:rollback
    pub const TRANSACTION_ROLLBACK: &str = "amqp:transaction:rollback";
    /// amqp:transaction:timeout
    pub const TRANSACTION_TIMEOUT: &str = "amqp:transaction:timeout";
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
    /// amqp:declared:list (0x33): the coordinator's answer to a declare.
    Declared {
        /// The new transaction's id.
        txn_id: Bytes,
    },
    /// amqp:transactional-state:list (0x34): a transfer or settlement that
    /// belongs to a transaction, with the outcome it will have once the
    /// transaction commits.
    Transactional {
        /// The transaction.
        txn_id: Bytes,
        /// One of the four outcomes (accepted, rejected, released,
        /// modified), or none on a posted transfer.
        outcome: Option<Box<DeliveryState>>,
    },
    /// Any other described delivery state, kept as a value so that it can
    /// be refused cleanly.
    Other(Value),
}

impl DeliveryState {
    /// Whether this is one of the four outcomes (accepted, rejected,
    /// released, modified).
    pub fn is_outcome(&self) -> bool {
        matches!(
            self,
            DeliveryState::Accepted
                | DeliveryState::Rejected { .. }
                | DeliveryState::Released
                | DeliveryState::Modified { .. }
        )
    }

    /// Decode a delivery state (a described list) from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<DeliveryState, CodecError> {
        let mut decoder = Decoder::new(input);
        opt_delivery_state(&mut decoder)?.ok_or(unexpected("delivery state", fc::NULL))
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            DeliveryState::Received {
                section_number,
                section_offset,
            } => {
                let mut w = CompositeWriter::begin(out, dc::RECEIVED);
                w.uint(*section_number).ulong(*section_offset);
                w.finish();
            }
            DeliveryState::Accepted => CompositeWriter::begin(out, dc::ACCEPTED).finish(),
            DeliveryState::Rejected { error } => {
                let mut w = CompositeWriter::begin(out, dc::REJECTED);
                w.opt(error.as_ref(), |out, e| e.encode(out));
                w.finish();
            }
            DeliveryState::Released => CompositeWriter::begin(out, dc::RELEASED).finish(),
            DeliveryState::Modified {
                delivery_failed,
                undeliverable_here,
                message_annotations,
            } => {
                let mut w = CompositeWriter::begin(out, dc::MODIFIED);
                w.flag(*delivery_failed)
                    .flag(*undeliverable_here)
                    .opt_fields(message_annotations.as_ref());
                w.finish();
            }
            DeliveryState::Declared { txn_id } => {
                let mut w = CompositeWriter::begin(out, dc::DECLARED);
                w.binary(txn_id);
                w.finish();
            }
            DeliveryState::Transactional { txn_id, outcome } => {
                let mut w = CompositeWriter::begin(out, dc::TRANSACTIONAL_STATE);
                w.binary(txn_id)
                    .opt(outcome.as_deref(), |out, o| o.encode(out));
                w.finish();
            }
            DeliveryState::Other(value) => encode::put_value(out, value),
        }
    }
}

/// Read a field that is null or a delivery state. A described value with a
/// descriptor other than the five messaging states is kept whole as
/// [`DeliveryState::Other`] so the engine can refuse it cleanly.
pub(crate) fn opt_delivery_state(d: &mut Decoder<'_>) -> Result<Option<DeliveryState>, CodecError> {
    let Some(descriptor) = d.opt_descriptor()? else {
        return Ok(None);
    };
    let state = match descriptor_code(&descriptor) {
        Some(dc::RECEIVED) => d.composite(|d, l| {
            Ok(DeliveryState::Received {
                section_number: d.required(l, Decoder::opt_uint, "section-number")?,
                section_offset: d.required(l, Decoder::opt_ulong, "section-offset")?,
            })
        })?,
        Some(dc::ACCEPTED) => d.composite(|_, _| Ok(DeliveryState::Accepted))?,
        Some(dc::REJECTED) => d.composite(|d, l| {
            Ok(DeliveryState::Rejected {
                error: d.field(l, opt_error)?,
            })
        })?,
        Some(dc::RELEASED) => d.composite(|_, _| Ok(DeliveryState::Released))?,
        Some(dc::MODIFIED) => d.composite(|d, l| {
            Ok(DeliveryState::Modified {
                delivery_failed: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
                undeliverable_here: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
                message_annotations: d.field(l, Decoder::opt_fields)?,
            })
        })?,
        Some(dc::DECLARED) => d.composite(|d, l| {
            Ok(DeliveryState::Declared {
                txn_id: d.required(l, Decoder::opt_binary, "txn-id")?,
            })
        })?,
        Some(dc::TRANSACTIONAL_STATE) => d.composite(|d, l| {
            let txn_id = d.required(l, Decoder::opt_binary, "txn-id")?;
            let outcome = d.field(l, opt_delivery_state)?;
            if outcome.as_ref().is_some_and(|o| !o.is_outcome()) {
                return Err(CodecError::InvalidValue(
                    "transactional-state outcome is not an outcome",
                ));
            }
            Ok(DeliveryState::Transactional {
                txn_id,
                outcome: outcome.map(Box::new),
            })
        })?,
        _ => {
            d.enter()?;
            let value = d.value()?;
            d.leave();
            DeliveryState::Other(Value::Described(Box::new((descriptor, value))))
        }
    };
    Ok(Some(state))
}

impl Error {
    /// Decode an error (amqp:error:list) from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<Error, CodecError> {
        Decoder::new(input).expect_composite(dc::ERROR, Error::decode_fields)
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let mut w = CompositeWriter::begin(out, dc::ERROR);
        w.symbol(&self.condition)
            .opt_string(self.description.as_deref())
            .opt_fields(self.info.as_ref());
        w.finish();
    }

    fn decode_fields(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Error, CodecError> {
        Ok(Error {
            condition: d.required(l, Decoder::opt_symbol, "condition")?,
            description: d.field(l, Decoder::opt_string)?,
            info: d.field(l, Decoder::opt_fields)?,
        })
    }
}

/// Read a field that is null or an `error`.
pub(crate) fn opt_error(d: &mut Decoder<'_>) -> Result<Option<Error>, CodecError> {
    d.opt_composite(dc::ERROR, Error::decode_fields)
}

/// An address (`*` requiring address-string): a string; a symbol is
/// accepted too, as some peers send one.
fn opt_address(d: &mut Decoder<'_>) -> Result<Option<String>, CodecError> {
    match d.peek_u8()? {
        fc::SYM8 | fc::SYM32 => Ok(d.opt_symbol()?.map(|s| s.0)),
        _ => d.opt_string(),
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

/// Which of the spec's target archetypes a [`Target`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TargetKind {
    /// A node (amqp:target:list, 0x29): every field applies.
    #[default]
    Node,
    /// The transaction coordinator (amqp:coordinator:list, 0x30,
    /// transactions 4.5.1), which a client attaches to declare
    /// transactions. Only `capabilities` applies: the other fields are
    /// neither decoded nor encoded.
    Coordinator,
}

/// The target terminus (amqp:target:list, 0x29), or the transaction
/// coordinator (amqp:coordinator:list, 0x30) that stands in the same place
/// of an attach: a valid frame with a coordinator must decode, so that the
/// engine can refuse the link alone.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Target {
    /// node or coordinator
    pub kind: TargetKind,
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

impl Source {
    /// Decode a source (amqp:source:list) from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<Source, CodecError> {
        Decoder::new(input).expect_composite(dc::SOURCE, Source::decode_fields)
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let mut w = CompositeWriter::begin(out, dc::SOURCE);
        w.opt_string(self.address.as_deref())
            .uint_default(self.durable, 0)
            .opt_symbol(self.expiry_policy.as_ref())
            .uint_default(self.timeout, 0)
            .flag(self.dynamic)
            .opt_fields(self.dynamic_node_properties.as_ref())
            .opt_symbol(self.distribution_mode.as_ref())
            .opt_fields(self.filter.as_ref())
            .opt_value(self.default_outcome.as_ref())
            .symbols(&self.outcomes)
            .symbols(&self.capabilities);
        w.finish();
    }

    fn decode_fields(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Source, CodecError> {
        Ok(Source {
            address: d.field(l, opt_address)?,
            durable: d.field(l, Decoder::opt_uint)?.unwrap_or(0),
            expiry_policy: d.field(l, Decoder::opt_symbol)?,
            timeout: d.field(l, Decoder::opt_uint)?.unwrap_or(0),
            dynamic: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
            dynamic_node_properties: d.field(l, Decoder::opt_fields)?,
            distribution_mode: d.field(l, Decoder::opt_symbol)?,
            filter: d.field(l, Decoder::opt_fields)?,
            default_outcome: d.field(l, Decoder::opt_value)?,
            outcomes: d.field(l, Decoder::symbols)?.unwrap_or_default(),
            capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        })
    }
}

/// Read a field that is null or a source.
pub(crate) fn opt_source(d: &mut Decoder<'_>) -> Result<Option<Source>, CodecError> {
    d.opt_composite(dc::SOURCE, Source::decode_fields)
}

impl Target {
    /// Decode a target (amqp:target:list) or a transaction coordinator
    /// (amqp:coordinator:list) from the front of `input`. Any other
    /// descriptor is [`CodecError::UnknownDescriptor`].
    pub fn decode(input: &mut Bytes) -> Result<Target, CodecError> {
        opt_target(&mut Decoder::new(input))?.ok_or(unexpected("described type", fc::NULL))
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        if self.kind == TargetKind::Coordinator {
            let mut w = CompositeWriter::begin(out, dc::COORDINATOR);
            w.symbols(&self.capabilities);
            w.finish();
            return;
        }
        let mut w = CompositeWriter::begin(out, dc::TARGET);
        w.opt_string(self.address.as_deref())
            .uint_default(self.durable, 0)
            .opt_symbol(self.expiry_policy.as_ref())
            .uint_default(self.timeout, 0)
            .flag(self.dynamic)
            .opt_fields(self.dynamic_node_properties.as_ref())
            .symbols(&self.capabilities);
        w.finish();
    }

    fn decode_fields(d: &mut Decoder<'_>, l: &mut ListFields) -> Result<Target, CodecError> {
        Ok(Target {
            kind: TargetKind::Node,
            address: d.field(l, opt_address)?,
            durable: d.field(l, Decoder::opt_uint)?.unwrap_or(0),
            expiry_policy: d.field(l, Decoder::opt_symbol)?,
            timeout: d.field(l, Decoder::opt_uint)?.unwrap_or(0),
            dynamic: d.field(l, Decoder::opt_bool)?.unwrap_or(false),
            dynamic_node_properties: d.field(l, Decoder::opt_fields)?,
            capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
        })
    }

    fn decode_coordinator_fields(
        d: &mut Decoder<'_>,
        l: &mut ListFields,
    ) -> Result<Target, CodecError> {
        Ok(Target {
            kind: TargetKind::Coordinator,
            capabilities: d.field(l, Decoder::symbols)?.unwrap_or_default(),
            ..Target::default()
        })
    }
}

/// Read a field that is null, a target or a transaction coordinator.
pub(crate) fn opt_target(d: &mut Decoder<'_>) -> Result<Option<Target>, CodecError> {
    let Some(descriptor) = d.opt_descriptor()? else {
        return Ok(None);
    };
    match descriptor_code(&descriptor) {
        Some(dc::TARGET) => d.composite(Target::decode_fields).map(Some),
        Some(dc::COORDINATOR) => d.composite(Target::decode_coordinator_fields).map(Some),
        _ => Err(CodecError::UnknownDescriptor(describe(&descriptor))),
    }
}

/// Read a role (restricted boolean).
pub(crate) fn opt_role(d: &mut Decoder<'_>) -> Result<Option<Role>, CodecError> {
    Ok(d.opt_bool()?.map(|receiver| {
        if receiver {
            Role::Receiver
        } else {
            Role::Sender
        }
    }))
}

impl Role {
    /// The boolean this role is encoded as.
    pub fn as_bool(self) -> bool {
        self == Role::Receiver
    }
}

impl SenderSettleMode {
    /// The ubyte this mode is encoded as.
    pub fn as_u8(self) -> u8 {
        match self {
            SenderSettleMode::Unsettled => 0,
            SenderSettleMode::Settled => 1,
            SenderSettleMode::Mixed => 2,
        }
    }
}

impl ReceiverSettleMode {
    /// The ubyte this mode is encoded as.
    pub fn as_u8(self) -> u8 {
        match self {
            ReceiverSettleMode::First => 0,
            ReceiverSettleMode::Second => 1,
        }
    }
}

/// Read a sender-settle-mode (restricted ubyte 0..=2).
pub(crate) fn opt_snd_settle_mode(
    d: &mut Decoder<'_>,
) -> Result<Option<SenderSettleMode>, CodecError> {
    d.opt_ubyte()?
        .map(|mode| match mode {
            0 => Ok(SenderSettleMode::Unsettled),
            1 => Ok(SenderSettleMode::Settled),
            2 => Ok(SenderSettleMode::Mixed),
            _ => Err(CodecError::InvalidValue("sender-settle-mode")),
        })
        .transpose()
}

/// Read a receiver-settle-mode (restricted ubyte 0..=1).
pub(crate) fn opt_rcv_settle_mode(
    d: &mut Decoder<'_>,
) -> Result<Option<ReceiverSettleMode>, CodecError> {
    d.opt_ubyte()?
        .map(|mode| match mode {
            0 => Ok(ReceiverSettleMode::First),
            1 => Ok(ReceiverSettleMode::Second),
            _ => Err(CodecError::InvalidValue("receiver-settle-mode")),
        })
        .transpose()
}
