//! The seam between a connection and its bytes: the engine serves any
//! ordered byte stream (TCP, TLS over TCP, later WebSocket) through one
//! boxed [`ByteStream`], plus what the transport learnt about the peer.
//! The engine never learns how the bytes travel.

use std::any::Any;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What a connection reads and writes.
pub(crate) trait ByteStream: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {
    /// The TCP socket itself, if the stream is a bare one (no TLS, no
    /// WebSocket): the outbox tries its writes on it directly.
    fn as_tcp(&mut self) -> Option<&mut TcpStream>;
}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> ByteStream for T {
    fn as_tcp(&mut self) -> Option<&mut TcpStream> {
        (self as &mut dyn Any).downcast_mut()
    }
}

/// An accepted connection, its transport already set up.
pub(crate) struct Transport {
    /// The bytes.
    pub(crate) stream: Box<dyn ByteStream>,
    /// Bytes the transport read while deciding what it is (a protocol
    /// header); the handshake reads them first.
    pub(crate) prefix: Vec<u8>,
    /// The peer's address.
    pub(crate) peer: SocketAddr,
    /// Whether the bytes are encrypted (TLS).
    pub(crate) secure: bool,
    /// The listener's kind of transport, as the operator sees it.
    pub(crate) kind: super::TransportKind,
    /// The subject CN of the peer's verified client certificate (SASL
    /// EXTERNAL logs in as it).
    pub(crate) client_name: Option<String>,
    /// When the connection was accepted: the handshake time-out counts
    /// from here, TLS included.
    pub(crate) accepted_at: Instant,
}
