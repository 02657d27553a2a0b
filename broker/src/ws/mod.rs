//! AMQP over WebSocket (the OASIS AMQP WebSocket binding: RFC 6455, the
//! `amqp` subprotocol, AMQP bytes in binary messages). `upgrade.rs` answers
//! the HTTP upgrade (or refuses it with an HTTP error); `stream.rs` turns
//! the WebSocket into the ordered byte stream the engine serves, the same
//! engine as TCP and TLS.
//!
//! Knows HTTP and WebSocket framing and nothing of AMQP: a message's bytes
//! may hold part of a frame or several frames, and the engine never learns
//! that they came over WebSocket. TLS (wss) is set up by the node before
//! the upgrade, with the AMQP port's certificates.

mod stream;
mod upgrade;

pub(crate) use stream::WsByteStream;
pub(crate) use upgrade::upgrade;

/// The subprotocol the binding names (`Sec-WebSocket-Protocol: amqp`).
pub(crate) const SUBPROTOCOL: &str = "amqp";

/// The largest HTTP request head we read before the upgrade; a longer one
/// is answered 431 and closed, so a peer cannot make us buffer without
/// end before it has even logged in.
pub(crate) const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
