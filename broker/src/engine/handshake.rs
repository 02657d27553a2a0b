//! The start of a connection, before any AMQP frame: the protocol headers
//! and the SASL layer (the mechanisms themselves are in `sasl.rs`).
//!
//! The caller bounds the whole exchange with the handshake time-out, so a
//! peer that stalls half-way is dropped.

use bytes::BytesMut;
use tokio::io::AsyncReadExt;

use super::outbox::Outbox;
use super::sasl::{self, Login, SaslPeer};
use super::transport::ByteStream;
use crate::auth::Authenticator;
use crate::codec::frame::{AMQP_HEADER, SASL_HEADER};
use crate::codec::ProtocolHeader;

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

pub(super) async fn read_header(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
) -> std::io::Result<[u8; 8]> {
    while buf.len() < 8 {
        if stream.read_buf(buf).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    let mut header = [0u8; 8];
    header.copy_from_slice(&buf.split_to(8));
    Ok(header)
}

/// Run the protocol-header and SASL exchange. On success the AMQP header
/// has been answered (queued in `out`) and `buf` holds whatever the peer
/// sent after its AMQP header. On failure `out` holds what should still be
/// written before the socket is closed (our header, a SASL outcome).
pub(crate) async fn run(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
    out: &mut Outbox,
    auth: &Authenticator,
    peer: &SaslPeer<'_>,
) -> Result<Login, HandshakeError> {
    let header = read_header(stream, buf).await?;
    match ProtocolHeader::parse(&header) {
        ProtocolHeader::Amqp if auth.anonymous_allowed() => {
            out.raw(&AMQP_HEADER);
            // The peer may wait for our header before it sends `open`.
            out.flush(stream).await?;
            return Ok(Login::anonymous(auth));
        }
        ProtocolHeader::Amqp => {
            // Tell the peer what we do speak, then close (transport 2.2).
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::SaslRequired);
        }
        ProtocolHeader::Sasl => {}
        ProtocolHeader::Tls => {
            // Only reached where TLS is off: with TLS configured the
            // listener takes this header before the engine sees it.
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::TlsUnsupported);
        }
        ProtocolHeader::Other(bytes) => {
            out.raw(&SASL_HEADER);
            return Err(HandshakeError::BadHeader(bytes));
        }
    }
    out.raw(&SASL_HEADER);
    let login = sasl::exchange(stream, buf, out, auth, peer).await?;

    let header = read_header(stream, buf).await?;
    if ProtocolHeader::parse(&header) != ProtocolHeader::Amqp {
        out.raw(&AMQP_HEADER);
        return Err(HandshakeError::BadHeader(header));
    }
    out.raw(&AMQP_HEADER);
    out.flush(stream).await?;
    Ok(login)
}
