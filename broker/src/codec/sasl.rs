//! SASL frame bodies (security 5.3): mechanisms, init, challenge, response,
//! outcome.

use bytes::{Bytes, BytesMut};

use super::error::CodecError;
use super::value::Symbol;

/// sasl-mechanisms (0x40)
#[derive(Debug, Clone, PartialEq)]
pub struct SaslMechanisms {
    /// sasl-server-mechanisms (mandatory, multiple)
    pub mechanisms: Vec<Symbol>,
}

/// sasl-init (0x41)
#[derive(Debug, Clone, PartialEq)]
pub struct SaslInit {
    /// mechanism (mandatory)
    pub mechanism: Symbol,
    /// initial-response
    pub initial_response: Option<Bytes>,
    /// hostname
    pub hostname: Option<String>,
}

/// sasl-code (security 5.3.3.6), a ubyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslCode {
    /// 0: authentication succeeded
    Ok,
    /// 1: failed due to bad credentials
    Auth,
    /// 2: failed due to a system error
    Sys,
    /// 3: failed due to an unrecoverable system error
    SysPerm,
    /// 4: failed due to a transient system error
    SysTemp,
}

/// sasl-outcome (0x44)
#[derive(Debug, Clone, PartialEq)]
pub struct SaslOutcome {
    /// code (mandatory)
    pub code: SaslCode,
    /// additional-data
    pub additional_data: Option<Bytes>,
}

/// Any SASL frame body.
#[derive(Debug, Clone, PartialEq)]
pub enum SaslFrame {
    /// sasl-mechanisms
    Mechanisms(SaslMechanisms),
    /// sasl-init
    Init(SaslInit),
    /// sasl-challenge (0x42): challenge bytes (mandatory)
    Challenge(Bytes),
    /// sasl-response (0x43): response bytes (mandatory)
    Response(Bytes),
    /// sasl-outcome
    Outcome(SaslOutcome),
}

impl SaslFrame {
    /// Decode a SASL frame body from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<SaslFrame, CodecError> {
        let _ = input;
        unimplemented!("codec: SaslFrame::decode")
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let _ = out;
        unimplemented!("codec: SaslFrame::encode")
    }
}
