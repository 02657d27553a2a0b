//! The client side of the upgrade (RFC 6455 section 4.1): send the GET
//! with a fresh key and the `amqp` subprotocol, check the 101 answer, and
//! hand back the WebSocket as a byte stream. The broker never dials a
//! WebSocket itself; this is for the bench's WebSocket client and for
//! tests, so that they can speak AMQP over our framing.

use std::io;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{accept_key, WsByteStream, MAX_REQUEST_HEAD_BYTES, SUBPROTOCOL};

/// Upgrade `stream` (connected to `host`) to a WebSocket on `path` with
/// the `amqp` subprotocol; messages from the server may be up to
/// `max_message_bytes`. Fails with `InvalidData` when the server does not
/// answer 101 with the right accept key and subprotocol.
pub async fn connect<S>(
    mut stream: S,
    host: &str,
    path: &str,
    max_message_bytes: usize,
) -> io::Result<WsByteStream<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| io::Error::other(e.to_string()))?;
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let expected = accept_key(key.as_bytes());
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                check_response(&response, &expected)?;
                return Ok(WsByteStream::client(stream, &buf[len..], max_message_bytes));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST_HEAD_BYTES => {}
            Ok(httparse::Status::Partial) => return Err(refused("response head too large")),
            Err(error) => return Err(refused(&format!("not an HTTP response: {error}"))),
        }
    }
}

fn refused(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("websocket upgrade: {why}"),
    )
}

fn check_response(response: &httparse::Response<'_, '_>, expected: &str) -> io::Result<()> {
    if response.code != Some(101) {
        return Err(refused(&format!(
            "answered {} {}",
            response.code.unwrap_or(0),
            response.reason.unwrap_or("")
        )));
    }
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    if header("sec-websocket-accept") != Some(expected.as_bytes()) {
        return Err(refused("wrong Sec-WebSocket-Accept"));
    }
    if header("sec-websocket-protocol") != Some(SUBPROTOCOL.as_bytes()) {
        return Err(refused("the server did not pick the amqp subprotocol"));
    }
    Ok(())
}
