//! AMQP over WebSocket (the OASIS AMQP WebSocket binding: RFC 6455, the
//! `amqp` subprotocol, AMQP bytes in binary messages). `upgrade.rs` answers
//! the HTTP upgrade (or refuses it with an HTTP error); `frame.rs` is the
//! RFC 6455 framing and `stream.rs` turns the WebSocket into the ordered
//! byte stream the engine serves, the same engine as TCP and TLS.
//! `connect.rs` is the client side of the upgrade, for the bench and tests
//! (a client of others, fe2o3-amqp-ws over tungstenite, checks the server
//! in the tests).
//!
//! Knows HTTP and WebSocket framing and nothing of AMQP: a message's bytes
//! may hold part of a frame or several frames, and the engine never learns
//! that they came over WebSocket. TLS (wss) is set up by the node before
//! the upgrade, with the AMQP port's certificates.

mod connect;
mod frame;
mod stream;
mod upgrade;

pub use connect::connect;
pub(crate) use frame::{fuzz_check, fuzz_seeds};
pub use stream::WsByteStream;
pub(crate) use upgrade::upgrade;

/// The subprotocol the binding names (`Sec-WebSocket-Protocol: amqp`).
pub(crate) const SUBPROTOCOL: &str = "amqp";

/// The largest HTTP request head we read before the upgrade; a longer one
/// is answered 431 and closed, so a peer cannot make us buffer without
/// end before it has even logged in.
pub(crate) const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;

/// The `Sec-WebSocket-Accept` value answering `key` (RFC 6455 4.2.2):
/// base64 of the SHA-1 of the key and the protocol's GUID.
fn accept_key(key: &[u8]) -> String {
    use base64::Engine as _;
    use sha1::Digest as _;
    let mut sha = sha1::Sha1::new();
    sha.update(key);
    sha.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

#[cfg(test)]
mod tests {
    #[test]
    fn accept_key_matches_the_rfc_example() {
        // RFC 6455 section 1.3.
        assert_eq!(
            super::accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
