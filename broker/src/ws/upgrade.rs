//! The HTTP/1.1 upgrade to WebSocket (RFC 6455 section 4.2), done by hand
//! rather than by tungstenite's server handshake so that every bad request
//! gets an HTTP error answer (tungstenite drops the connection without
//! one): 405 for a method other than GET, 426 for a request that is no
//! WebSocket upgrade (or another WebSocket version), 400 for a malformed
//! one or one without the `amqp` subprotocol, 431 for a head over
//! [`MAX_REQUEST_HEAD_BYTES`]. A good one gets 101 with the accept key and
//! `Sec-WebSocket-Protocol: amqp`, and the stream becomes a WebSocket.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{accept_key, WsByteStream, MAX_REQUEST_HEAD_BYTES, SUBPROTOCOL};

/// Why a connection was not upgraded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpgradeError {
    /// The socket failed or closed during the request.
    #[error("websocket upgrade: {0}")]
    Io(#[from] std::io::Error),
    /// The request was refused with this HTTP status (already sent).
    #[error("websocket upgrade refused with HTTP {status}: {reason}")]
    Refused {
        /// The status answered.
        status: u16,
        /// Why.
        reason: &'static str,
    },
}

/// A refusal: the status line, extra headers, and the reason (also the
/// body, so a person with curl sees it).
struct Refusal {
    status: u16,
    phrase: &'static str,
    headers: &'static str,
    reason: &'static str,
}

impl Refusal {
    const fn new(status: u16, phrase: &'static str, reason: &'static str) -> Refusal {
        Refusal {
            status,
            phrase,
            headers: "",
            reason,
        }
    }

    fn response(&self) -> String {
        format!(
            "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n{}\n",
            self.status,
            self.phrase,
            self.reason.len() + 1,
            self.headers,
            self.reason
        )
    }
}

/// The header's value, when present (names compare case-insensitively).
fn header<'a>(headers: &'a [httparse::Header<'a>], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: Option<&str>, token: &str) -> bool {
    value.is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

/// Check a complete request head; the accept key to answer with.
fn check(request: &httparse::Request<'_, '_>) -> Result<String, Refusal> {
    if request.method != Some("GET") {
        return Err(Refusal {
            headers: "Allow: GET\r\n",
            ..Refusal::new(
                405,
                "Method Not Allowed",
                "AMQP over WebSocket needs a GET upgrade",
            )
        });
    }
    let headers = &*request.headers;
    let upgrade_ok = has_token(header(headers, "upgrade"), "websocket")
        && has_token(header(headers, "connection"), "upgrade");
    if !upgrade_ok {
        return Err(Refusal {
            headers: "Upgrade: websocket\r\n",
            ..Refusal::new(
                426,
                "Upgrade Required",
                "this port speaks AMQP over WebSocket only",
            )
        });
    }
    if header(headers, "sec-websocket-version").map(str::trim) != Some("13") {
        return Err(Refusal {
            headers: "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n",
            ..Refusal::new(426, "Upgrade Required", "WebSocket version 13 only")
        });
    }
    let Some(key) = header(headers, "sec-websocket-key").map(str::trim) else {
        return Err(Refusal::new(400, "Bad Request", "no Sec-WebSocket-Key"));
    };
    // RFC 6455 4.2.1: 16 random bytes in base64, so 24 characters.
    if key.len() != 24 {
        return Err(Refusal::new(
            400,
            "Bad Request",
            "a malformed Sec-WebSocket-Key",
        ));
    }
    if !has_token(header(headers, "sec-websocket-protocol"), SUBPROTOCOL) {
        return Err(Refusal::new(
            400,
            "Bad Request",
            "the amqp subprotocol is required (Sec-WebSocket-Protocol: amqp)",
        ));
    }
    Ok(accept_key(key.as_bytes()))
}

/// Read the request head (bounded), answer it, and hand back the
/// WebSocket as a byte stream; a refused request has had its HTTP error
/// and is closed. `max_message_bytes` bounds one WebSocket message (and
/// frame) the peer may send. The caller bounds the time this takes.
pub(crate) async fn upgrade<S>(
    mut stream: S,
    max_message_bytes: usize,
) -> Result<WsByteStream<S>, UpgradeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let (outcome, head_len) = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => break (check(&request), len),
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST_HEAD_BYTES => continue,
            Ok(httparse::Status::Partial) => {
                break (
                    Err(Refusal::new(
                        431,
                        "Request Header Fields Too Large",
                        "the request head is too large",
                    )),
                    0,
                )
            }
            Err(httparse::Error::TooManyHeaders) => {
                break (
                    Err(Refusal::new(
                        431,
                        "Request Header Fields Too Large",
                        "too many request headers",
                    )),
                    0,
                )
            }
            Err(_) => {
                break (
                    Err(Refusal::new(400, "Bad Request", "not an HTTP request")),
                    0,
                )
            }
        }
    };
    let accept = match outcome {
        Ok(accept) => accept,
        Err(refusal) => {
            stream.write_all(refusal.response().as_bytes()).await?;
            stream.shutdown().await?;
            return Err(UpgradeError::Refused {
                status: refusal.status,
                reason: refusal.reason,
            });
        }
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await?;
    stream.flush().await?;
    // A client may pipeline its first WebSocket frames behind the request.
    Ok(WsByteStream::server(
        stream,
        &buf[head_len..],
        max_message_bytes,
    ))
}
