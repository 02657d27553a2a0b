//! A WebSocket as the ordered byte stream the engine reads and writes.
//! Binary messages are the bytes, in order, whatever AMQP frames they cut
//! through; each write becomes one binary message. Pings are answered by
//! tungstenite. A text message (the binding allows binary only) is
//! answered with close code 1003 and a message over the limit with 1009;
//! the read then fails, so the engine drops the connection: a clean
//! WebSocket close, never a half-open one.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

/// Why we end the WebSocket ourselves.
struct Closing {
    code: CloseCode,
    reason: &'static str,
    /// Whether the close message was handed to the sink yet.
    sent: bool,
}

/// The engine's view of one upgraded WebSocket.
pub(crate) struct WsByteStream<S> {
    ws: WebSocketStream<S>,
    /// The unread rest of the last binary message.
    pending: Bytes,
    /// The peer closed (or the socket ended): reads return end of stream.
    eof: bool,
    /// A close we send before failing the read.
    closing: Option<Closing>,
}

impl<S> WsByteStream<S> {
    pub(crate) fn new(ws: WebSocketStream<S>) -> Self {
        WsByteStream {
            ws,
            pending: Bytes::new(),
            eof: false,
            closing: None,
        }
    }
}

fn io_error(error: WsError) -> io::Error {
    match error {
        WsError::Io(error) => error,
        WsError::ConnectionClosed | WsError::AlreadyClosed => io::ErrorKind::BrokenPipe.into(),
        other => io::Error::other(other),
    }
}

fn close(code: CloseCode, reason: &'static str) -> Closing {
    Closing {
        code,
        reason,
        sent: false,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsByteStream<S> {
    /// Send our close frame and flush it; then the read fails with the
    /// reason. Errors while closing are ignored: the connection ends
    /// either way.
    fn poll_close_with(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let Some(closing) = self.closing.as_mut() else {
            return Poll::Ready(io::ErrorKind::InvalidData.into());
        };
        if !closing.sent {
            match Pin::new(&mut self.ws).poll_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) => {
                    let frame = CloseFrame {
                        code: closing.code,
                        reason: closing.reason.into(),
                    };
                    let _ = Pin::new(&mut self.ws).start_send(Message::Close(Some(frame)));
                }
                Poll::Ready(Err(_)) => {}
            }
            closing.sent = true;
        }
        let reason = closing.reason;
        if Pin::new(&mut self.ws).poll_flush(cx).is_pending() {
            return Poll::Pending;
        }
        self.eof = true;
        Poll::Ready(io::Error::new(io::ErrorKind::InvalidData, reason))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WsByteStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let start = buf.filled().len();
        loop {
            if !this.pending.is_empty() {
                let n = this.pending.len().min(buf.remaining());
                buf.put_slice(&this.pending[..n]);
                this.pending.advance(n);
                if buf.remaining() == 0 {
                    return Poll::Ready(Ok(()));
                }
                // Room left: take the messages already received too, so
                // the engine reads a burst of small frames in one go, as
                // it would from a TCP socket, not one message per read.
                continue;
            }
            let filled = buf.filled().len() > start;
            if this.closing.is_some() {
                if filled {
                    // The bytes before the bad message first.
                    return Poll::Ready(Ok(()));
                }
                let error = ready!(this.poll_close_with(cx));
                this.closing = None;
                return Poll::Ready(Err(error));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let next = match Pin::new(&mut this.ws).poll_next(cx) {
                // Nothing more received yet: hand over what we have (the
                // waker stays registered; a wake-up then is harmless).
                Poll::Pending if filled => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(next) => next,
            };
            match next {
                Some(Ok(Message::Binary(bytes))) => this.pending = bytes,
                Some(Ok(Message::Text(_))) => {
                    this.closing = Some(close(
                        CloseCode::Unsupported,
                        "AMQP over WebSocket takes binary messages only",
                    ));
                }
                // tungstenite answers pings itself; pongs and raw frames
                // carry no AMQP bytes.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                // tungstenite answers the peer's close.
                Some(Ok(Message::Close(_))) | None => this.eof = true,
                Some(Err(WsError::Capacity(_))) => {
                    this.closing = Some(close(CloseCode::Size, "message too large"));
                }
                Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => this.eof = true,
                Some(Err(error)) if filled => {
                    // Report it on the next read, after these bytes.
                    tracing::debug!(%error, "websocket read failed");
                    this.eof = true;
                    return Poll::Ready(Ok(()));
                }
                Some(Err(error)) => return Poll::Ready(Err(io_error(error))),
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WsByteStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(Pin::new(&mut this.ws).poll_ready(cx)).map_err(io_error)?;
        // One message for the whole batch the engine hands us: the
        // message's bytes are copied once, as a TLS record's would be.
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        let mut message = Vec::with_capacity(len);
        for buf in bufs {
            message.extend_from_slice(buf);
        }
        Pin::new(&mut this.ws)
            .start_send(Message::Binary(message.into()))
            .map_err(io_error)?;
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().ws)
            .poll_flush(cx)
            .map_err(io_error)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match ready!(Pin::new(&mut self.get_mut().ws).poll_close(cx)) {
            Ok(()) | Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => Poll::Ready(Ok(())),
            Err(error) => Poll::Ready(Err(io_error(error))),
        }
    }
}
