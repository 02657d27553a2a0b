//! The start of a connection, before any AMQP frame: protocol headers and
//! the SASL layer (ANONYMOUS, PLAIN against the configured users).
//!
//! The caller bounds the whole exchange with the handshake time-out, so a
//! peer that stalls half-way is dropped.

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::outbox::Outbox;
use crate::codec::frame::{decode_frame, AMQP_HEADER, SASL_HEADER};
use crate::codec::{
    FrameBody, ProtocolHeader, SaslCode, SaslFrame, SaslMechanisms, SaslOutcome, Symbol,
};
use crate::config::SaslConfig;

/// Largest SASL frame we read; SASL frames are tiny.
const SASL_FRAME_MAX_BYTES: u32 = 64 * 1024;

/// Who the peer turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// No SASL, or SASL ANONYMOUS.
    Anonymous,
    /// SASL PLAIN with this user.
    User(String),
}

/// Why the handshake ended without an AMQP connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("unsupported protocol header {0:?}")]
    BadHeader([u8; 8]),
    #[error("SASL required but the peer skipped it")]
    SaslRequired,
    #[error("TLS is not enabled on this listener")]
    TlsUnsupported,
    #[error("SASL: {0}")]
    Sasl(String),
    #[error("authentication failed for {0:?}")]
    AuthFailed(String),
}

async fn read_header(stream: &mut TcpStream, buf: &mut BytesMut) -> std::io::Result<[u8; 8]> {
    while buf.len() < 8 {
        if stream.read_buf(buf).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    let mut header = [0u8; 8];
    header.copy_from_slice(&buf.split_to(8));
    Ok(header)
}

async fn read_sasl_frame(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
) -> Result<SaslFrame, HandshakeError> {
    loop {
        match decode_frame(buf, SASL_FRAME_MAX_BYTES) {
            Ok(Some(frame)) => match frame.body {
                FrameBody::Sasl(sasl) => return Ok(sasl),
                _ => return Err(HandshakeError::Sasl("expected a SASL frame".into())),
            },
            Ok(None) => {
                if stream.read_buf(buf).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                }
            }
            Err(e) => return Err(HandshakeError::Sasl(e.to_string())),
        }
    }
}

/// Constant-time comparison, so a wrong password's timing says nothing
/// about how much of it was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Check a PLAIN response `authzid NUL authcid NUL passwd`.
fn check_plain(config: &SaslConfig, response: &[u8]) -> Result<String, HandshakeError> {
    let mut parts = response.split(|b| *b == 0);
    let (Some(_authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HandshakeError::Sasl("malformed PLAIN response".into()));
    };
    let user = String::from_utf8_lossy(user).into_owned();
    let known = config
        .users
        .iter()
        .find(|u| u.username == user)
        .is_some_and(|u| same_secret(u.password.as_bytes(), password));
    if known {
        Ok(user)
    } else {
        Err(HandshakeError::AuthFailed(user))
    }
}

/// Run the protocol-header and SASL exchange. On success the AMQP header
/// has been answered (queued in `out`) and `buf` holds whatever the peer
/// sent after its AMQP header. On failure `out` holds what should still be
/// written before the socket is closed (our header, a SASL outcome).
pub(crate) async fn run(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    out: &mut Outbox,
    config: &SaslConfig,
) -> Result<Identity, HandshakeError> {
    let header = read_header(stream, buf).await?;
    match ProtocolHeader::parse(&header) {
        ProtocolHeader::Amqp if config.allow_anonymous => {
            out.raw(&AMQP_HEADER);
            // The peer may wait for our header before it sends `open`.
            out.flush(stream).await?;
            return Ok(Identity::Anonymous);
        }
        ProtocolHeader::Amqp => {
            // Tell the peer what we do speak, then close (transport 2.2).
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::SaslRequired);
        }
        ProtocolHeader::Sasl => {}
        ProtocolHeader::Tls => {
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::TlsUnsupported);
        }
        ProtocolHeader::Other(bytes) => {
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::BadHeader(bytes));
        }
    }
    out.raw(&SASL_HEADER);
    let mut mechanisms = Vec::new();
    if config.allow_anonymous {
        mechanisms.push(Symbol::from("ANONYMOUS"));
    }
    if !config.users.is_empty() {
        mechanisms.push(Symbol::from("PLAIN"));
    }
    out.sasl(&SaslFrame::Mechanisms(SaslMechanisms { mechanisms }));
    out.flush(stream).await?;

    let SaslFrame::Init(init) = read_sasl_frame(stream, buf).await? else {
        return Err(HandshakeError::Sasl("expected sasl-init".into()));
    };
    let result = match init.mechanism.as_str() {
        "ANONYMOUS" if config.allow_anonymous => Ok(Identity::Anonymous),
        "PLAIN" if !config.users.is_empty() => {
            let response = match init.initial_response {
                Some(r) => r,
                None => {
                    // PLAIN without an initial response: ask for it.
                    out.sasl(&SaslFrame::Challenge(Bytes::new()));
                    out.flush(stream).await?;
                    match read_sasl_frame(stream, buf).await? {
                        SaslFrame::Response(r) => r,
                        _ => return Err(HandshakeError::Sasl("expected sasl-response".into())),
                    }
                }
            };
            check_plain(config, &response).map(Identity::User)
        }
        other => Err(HandshakeError::Sasl(format!(
            "mechanism {other:?} not offered"
        ))),
    };
    let code = if result.is_ok() {
        SaslCode::Ok
    } else {
        SaslCode::Auth
    };
    out.sasl(&SaslFrame::Outcome(SaslOutcome {
        code,
        additional_data: None,
    }));
    let identity = result?;
    out.flush(stream).await?;

    let header = read_header(stream, buf).await?;
    if ProtocolHeader::parse(&header) != ProtocolHeader::Amqp {
        out.raw(&AMQP_HEADER);
        return Err(HandshakeError::BadHeader(header));
    }
    out.raw(&AMQP_HEADER);
    out.flush(stream).await?;
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::User;

    fn config() -> SaslConfig {
        SaslConfig {
            allow_anonymous: false,
            users: vec![User {
                username: "alice".into(),
                password: "s3cret".into(),
            }],
        }
    }

    #[test]
    fn plain_accepts_the_right_password_only() {
        assert_eq!(check_plain(&config(), b"\0alice\0s3cret").unwrap(), "alice");
        assert!(matches!(
            check_plain(&config(), b"\0alice\0s3creT"),
            Err(HandshakeError::AuthFailed(_))
        ));
        assert!(matches!(
            check_plain(&config(), b"\0bob\0s3cret"),
            Err(HandshakeError::AuthFailed(_))
        ));
        assert!(matches!(
            check_plain(&config(), b"alice s3cret"),
            Err(HandshakeError::Sasl(_))
        ));
    }
}
