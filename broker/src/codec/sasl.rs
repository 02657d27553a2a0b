//! SASL frame bodies (security 5.3): mechanisms, init, challenge, response,
//! outcome.

use bytes::{Bytes, BytesMut};

use super::codes::{dc, describe, descriptor_code, fc};
use super::decode::{unexpected, Decoder};
use super::encode::{put_symbol_array, CompositeWriter};
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

impl SaslCode {
    /// The ubyte this code is encoded as.
    pub fn as_u8(self) -> u8 {
        match self {
            SaslCode::Ok => 0,
            SaslCode::Auth => 1,
            SaslCode::Sys => 2,
            SaslCode::SysPerm => 3,
            SaslCode::SysTemp => 4,
        }
    }

    fn from_u8(code: u8) -> Result<SaslCode, CodecError> {
        Ok(match code {
            0 => SaslCode::Ok,
            1 => SaslCode::Auth,
            2 => SaslCode::Sys,
            3 => SaslCode::SysPerm,
            4 => SaslCode::SysTemp,
            _ => return Err(CodecError::InvalidValue("sasl-code")),
        })
    }
}

impl SaslFrame {
    /// Decode a SASL frame body from the front of `input`.
    pub fn decode(input: &mut Bytes) -> Result<SaslFrame, CodecError> {
        let mut d = Decoder::new(input);
        let descriptor = d
            .opt_descriptor()?
            .ok_or(unexpected("SASL frame body", fc::NULL))?;
        Ok(match descriptor_code(&descriptor) {
            Some(dc::SASL_MECHANISMS) => SaslFrame::Mechanisms(d.composite(|d, l| {
                Ok(SaslMechanisms {
                    mechanisms: d.required(l, Decoder::opt_symbols, "sasl-server-mechanisms")?,
                })
            })?),
            Some(dc::SASL_INIT) => SaslFrame::Init(d.composite(|d, l| {
                Ok(SaslInit {
                    mechanism: d.required(l, Decoder::opt_symbol, "mechanism")?,
                    initial_response: d.field(l, Decoder::opt_binary)?,
                    hostname: d.field(l, Decoder::opt_string)?,
                })
            })?),
            Some(dc::SASL_CHALLENGE) => SaslFrame::Challenge(
                d.composite(|d, l| d.required(l, Decoder::opt_binary, "challenge"))?,
            ),
            Some(dc::SASL_RESPONSE) => SaslFrame::Response(
                d.composite(|d, l| d.required(l, Decoder::opt_binary, "response"))?,
            ),
            Some(dc::SASL_OUTCOME) => SaslFrame::Outcome(d.composite(|d, l| {
                Ok(SaslOutcome {
                    code: SaslCode::from_u8(d.required(l, Decoder::opt_ubyte, "code")?)?,
                    additional_data: d.field(l, Decoder::opt_binary)?,
                })
            })?),
            _ => return Err(CodecError::UnknownDescriptor(describe(&descriptor))),
        })
    }

    /// Append the encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            SaslFrame::Mechanisms(m) => {
                let mut w = CompositeWriter::begin(out, dc::SASL_MECHANISMS);
                // Mandatory: written as an array even when empty.
                w.with(|out| put_symbol_array(out, &m.mechanisms));
                w.finish();
            }
            SaslFrame::Init(init) => {
                let mut w = CompositeWriter::begin(out, dc::SASL_INIT);
                w.symbol(&init.mechanism)
                    .opt_binary(init.initial_response.as_ref())
                    .opt_string(init.hostname.as_deref());
                w.finish();
            }
            SaslFrame::Challenge(bytes) | SaslFrame::Response(bytes) => {
                let code = if matches!(self, SaslFrame::Challenge(_)) {
                    dc::SASL_CHALLENGE
                } else {
                    dc::SASL_RESPONSE
                };
                let mut w = CompositeWriter::begin(out, code);
                w.binary(bytes);
                w.finish();
            }
            SaslFrame::Outcome(outcome) => {
                let mut w = CompositeWriter::begin(out, dc::SASL_OUTCOME);
                w.ubyte(outcome.code.as_u8())
                    .opt_binary(outcome.additional_data.as_ref());
                w.finish();
            }
        }
    }
}
