//! The first bytes of a connection decide its transport. On the TLS
//! listener a client either starts TLS at once (amqps) or first sends the
//! AMQP TLS protocol header (spec 5.2.1), which we answer before TLS. On
//! the plain listener, when TLS is configured, that header upgrades the
//! connection the same way; any other header is handed on to the engine.
//! A plain AMQP or SASL header on the TLS listener is answered with the
//! TLS header and the connection closed (transport 2.2: the server names
//! the protocol it wants).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::{common_name, TlsServer};
use crate::codec::frame::TLS_HEADER;

/// How a connection goes on.
pub(crate) enum Negotiated {
    /// Plain AMQP; `prefix` is what was read already (the 8-byte header,
    /// or nothing) and belongs to the engine's handshake.
    Plain {
        /// The socket.
        stream: TcpStream,
        /// Bytes read while looking.
        prefix: Vec<u8>,
    },
    /// TLS is up.
    Tls {
        /// The encrypted stream.
        stream: Box<TlsStream<TcpStream>>,
        /// The subject CN of a verified client certificate.
        client_name: Option<String>,
    },
    /// Not served (a plain header on the TLS port); our answer was sent.
    Refused,
}

/// The subject CN of the verified client certificate of a TLS stream.
pub(crate) fn client_name<S>(stream: &TlsStream<S>) -> Option<String> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|cert| common_name(cert.as_ref()))
}

async fn start_tls(stream: TcpStream, tls: &TlsServer) -> std::io::Result<Negotiated> {
    let stream = tls.acceptor().accept(stream).await?;
    let client_name = client_name(&stream);
    Ok(Negotiated::Tls {
        stream: Box::new(stream),
        client_name,
    })
}

/// Look at the start of `stream` and set up its transport. `tls_port`:
/// it came in on the TLS listener. The caller bounds the time this takes.
pub(crate) async fn negotiate(
    mut stream: TcpStream,
    tls: Option<&TlsServer>,
    tls_port: bool,
) -> std::io::Result<Negotiated> {
    let Some(tls) = tls else {
        return Ok(Negotiated::Plain {
            stream,
            prefix: Vec::new(),
        });
    };
    if tls_port {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if first[0] != b'A' {
            // A TLS record (ClientHello): amqps without the header.
            return start_tls(stream, tls).await;
        }
    }
    // read_exact on a socket never reads past the 8 bytes, so whatever the
    // client pipelined after its header stays in the socket for TLS or
    // for the engine.
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).await?;
    if header == TLS_HEADER {
        stream.write_all(&TLS_HEADER).await?;
        return start_tls(stream, tls).await;
    }
    if tls_port {
        stream.write_all(&TLS_HEADER).await?;
        let _ = stream.shutdown().await;
        return Ok(Negotiated::Refused);
    }
    Ok(Negotiated::Plain {
        stream,
        prefix: header.to_vec(),
    })
}
