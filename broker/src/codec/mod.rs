//! AMQP 1.0 wire codec: the type system (primitives, described types,
//! lists, maps, arrays), the transport performatives, SASL frames, frame and
//! protocol-header parsing, and a light scanner over message sections.
//!
//! Architecture invariant: the codec does no IO, knows nothing of sessions,
//! links or queues, and never allocates a buffer sized by a length field
//! before that length has been checked against the bytes actually present
//! (and, for frames, against the negotiated max-frame-size).

mod codes;
pub mod dead_letter;
mod decode;
pub mod definitions;
mod encode;
pub mod error;
pub mod frame;
pub mod message;
pub mod performative;
pub mod sasl;
pub mod sections;
pub mod transaction;
pub mod transfer_head;
pub mod value;

pub use definitions::{
    DeliveryState, Error, ReceiverSettleMode, Role, SenderSettleMode, Source, Target, TargetKind,
};
pub use error::CodecError;
pub use frame::{Frame, FrameBody, ProtocolHeader};
pub use message::{Header, MessageView};
pub use performative::{
    Attach, Begin, Close, Detach, Disposition, End, Flow, Open, Performative, Transfer,
};
pub use sasl::{SaslCode, SaslFrame, SaslInit, SaslMechanisms, SaslOutcome};
pub use transaction::Control;
pub use transfer_head::TransferHead;
pub use value::{Array, Descriptor, Fields, Symbol, Value};
