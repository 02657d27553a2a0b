//! A WebSocket as the ordered byte stream the engine reads and writes.
//! Binary messages are the bytes, in order, whatever AMQP frames they cut
//! through; each write becomes one binary frame. The framing is ours
//! (`frame.rs`): received payloads are unmasked in place in one read
//! buffer that is never zero-filled again and handed to the engine as a
//! burst, as a TCP socket's bytes would be. Pings get a pong and a close
//! gets its echo; a text message (the binding allows binary only) is
//! answered with close code 1003, a message over the limit with 1009 and
//! a broken frame with 1002. The read then fails, so the engine drops the
//! connection: a clean WebSocket close, never a half-open one.

use std::io;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame::{
    apply_mask, close_code, write_header, FrameReader, Opcode, Role, Step, Violation,
    MAX_CONTROL_FRAME,
};

/// Most bytes one socket read takes.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Unsent bytes past which a write waits for the socket: what a slow
/// reader can make us hold, beyond one write's worth.
const WRITE_HIGH_BYTES: usize = 256 * 1024;

/// Masking keys fetched from the OS at once (a client masks every frame
/// with an unpredictable key, RFC 6455 5.3).
const KEYS_PER_FETCH: usize = 64;

/// How reading ends.
#[derive(Clone, Copy, Debug)]
enum End {
    /// The peer closed; our echo goes out, then end of stream.
    PeerClosed,
    /// The peer broke the protocol; our close goes out, then an error.
    Violation(Violation),
}

/// The engine's view of one upgraded WebSocket.
pub struct WsByteStream<S> {
    io: S,
    role: Role,
    reader: FrameReader,
    /// Received bytes; `start..end` not consumed yet.
    rbuf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Frames to send; `wpos..` not written yet.
    wbuf: Vec<u8>,
    wpos: usize,
    /// How reading ends, once decided.
    ending: Option<End>,
    /// Reads return end of stream.
    eof: bool,
    /// Our close frame is queued: no data frame may follow it.
    close_sent: bool,
    /// A client's unused masking keys.
    keys: Vec<[u8; 4]>,
}

impl<S> std::fmt::Debug for WsByteStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsByteStream")
            .field("role", &self.role)
            .field("buffered", &(self.end - self.start))
            .field("unsent", &(self.wbuf.len() - self.wpos))
            .field("eof", &self.eof)
            .field("close_sent", &self.close_sent)
            .finish()
    }
}

impl<S> WsByteStream<S> {
    /// The server end of an upgraded connection; `received` holds bytes the
    /// client sent right behind its request.
    pub(crate) fn server(io: S, received: &[u8], max_message_bytes: usize) -> Self {
        Self::new(io, Role::Server, received, max_message_bytes)
    }

    /// The client end of a connection whose upgrade was answered 101;
    /// `received` holds bytes read past the response. Used by the bench's
    /// WebSocket client; a client masks what it sends.
    pub fn client(io: S, received: &[u8], max_message_bytes: usize) -> Self {
        Self::new(io, Role::Client, received, max_message_bytes)
    }

    fn new(io: S, role: Role, received: &[u8], max_message_bytes: usize) -> Self {
        let mut rbuf = vec![0u8; READ_BUFFER_BYTES.max(received.len())].into_boxed_slice();
        rbuf[..received.len()].copy_from_slice(received);
        WsByteStream {
            io,
            role,
            reader: FrameReader::new(role, max_message_bytes),
            rbuf,
            start: 0,
            end: received.len(),
            wbuf: Vec::new(),
            wpos: 0,
            ending: None,
            eof: false,
            close_sent: false,
            keys: Vec::new(),
        }
    }

    /// The key to mask the next frame with (`None` for a server).
    fn next_mask(&mut self) -> io::Result<Option<[u8; 4]>> {
        if self.role == Role::Server {
            return Ok(None);
        }
        if self.keys.is_empty() {
            let mut fresh = [0u8; 4 * KEYS_PER_FETCH];
            getrandom::fill(&mut fresh).map_err(|e| io::Error::other(e.to_string()))?;
            self.keys = fresh
                .chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect();
        }
        Ok(self.keys.pop())
    }

    /// Queue one final frame of `opcode` carrying `parts`.
    fn queue_frame<T: Deref<Target = [u8]>>(
        &mut self,
        opcode: Opcode,
        parts: &[T],
    ) -> io::Result<()> {
        let len = parts.iter().map(|p| p.len()).sum();
        let mask = self.next_mask()?;
        write_header(&mut self.wbuf, opcode, len, mask);
        let body = self.wbuf.len();
        for part in parts {
            self.wbuf.extend_from_slice(&part[..]);
        }
        if let Some(key) = mask {
            apply_mask(&mut self.wbuf[body..], key, 0);
        }
        Ok(())
    }

    /// Queue our close frame (once).
    fn queue_close(&mut self, code: u16, reason: &str) -> io::Result<()> {
        if self.close_sent {
            return Ok(());
        }
        self.close_sent = true;
        // A control frame carries at most 125 bytes: the code and 123 of
        // the reason.
        let reason = &reason.as_bytes()[..reason.len().min(123)];
        self.queue_frame(Opcode::Close, &[&code.to_be_bytes()[..], reason])
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsByteStream<S> {
    /// Write out every queued frame.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.wpos < self.wbuf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.wpos += n;
        }
        self.wbuf.clear();
        self.wpos = 0;
        Poll::Ready(Ok(()))
    }

    /// Send queued pongs and closes without waiting. A failure matters
    /// only while the connection goes on: a peer that closed may be gone
    /// before our echo reaches it.
    fn poll_send_replies(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.poll_drain(cx) {
            Poll::Ready(Err(error)) if self.ending.is_none() => Err(error),
            _ => Ok(()),
        }
    }

    /// Answer a control frame at `rbuf[at..at + len]`.
    fn on_control(&mut self, opcode: Opcode, at: usize, len: usize) -> io::Result<()> {
        match opcode {
            Opcode::Ping if !self.close_sent => {
                let payload = self.rbuf[at..at + len].to_vec();
                self.queue_frame(Opcode::Pong, &[&payload[..]])?;
            }
            Opcode::Close => {
                let payload = &self.rbuf[at..at + len];
                if payload.len() == 1 {
                    let broken = Violation {
                        code: close_code::PROTOCOL_ERROR,
                        reason: "close frame with a one-byte payload",
                    };
                    self.queue_close(broken.code, broken.reason)?;
                    self.ending = Some(End::Violation(broken));
                } else {
                    // Echo the peer's code (or none when it gave none).
                    let code = payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]]));
                    if !self.close_sent {
                        self.close_sent = true;
                        match code {
                            Some(code) => {
                                self.queue_frame(Opcode::Close, &[&code.to_be_bytes()[..]])?
                            }
                            None => self.queue_frame::<&[u8]>(Opcode::Close, &[])?,
                        }
                    }
                    self.ending = Some(End::PeerClosed);
                }
            }
            // A pong answers nothing; a ping after our close needs no pong.
            _ => {}
        }
        Ok(())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WsByteStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let start_len = buf.filled().len();
        // Pongs and closes queued by earlier reads go out first; a socket
        // that cannot take them now wakes this task when it can.
        if this.wpos < this.wbuf.len() {
            this.poll_send_replies(cx)?;
        }
        loop {
            let filled = buf.filled().len() > start_len;
            if let Some(end) = this.ending {
                if filled {
                    // The bytes before the close first.
                    return Poll::Ready(Ok(()));
                }
                // Errors sending our close are ignored: the connection
                // ends either way.
                let _ = ready!(this.poll_drain(cx));
                this.ending = None;
                this.eof = true;
                return Poll::Ready(match end {
                    End::PeerClosed => Ok(()),
                    End::Violation(v) => Err(io::Error::new(io::ErrorKind::InvalidData, v.reason)),
                });
            }
            if this.eof || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let at = this.start;
            match this
                .reader
                .step(&mut this.rbuf[at..this.end], buf.remaining())
            {
                Ok(Step::Payload { header, len }) => {
                    buf.put_slice(&this.rbuf[at + header..at + header + len]);
                    this.start += header + len;
                }
                Ok(Step::Control {
                    opcode,
                    header,
                    len,
                }) => {
                    this.start += header + len;
                    this.on_control(opcode, at + header, len)?;
                    // A pong goes out now, not with the engine's next
                    // write: the peer may be waiting for it alone.
                    this.poll_send_replies(cx)?;
                }
                Ok(Step::NeedMore) => {
                    if filled {
                        return Poll::Ready(Ok(()));
                    }
                    if this.start == this.end {
                        (this.start, this.end) = (0, 0);
                    } else if this.rbuf.len() - this.end < MAX_CONTROL_FRAME {
                        // A partial header or control frame at the end:
                        // move it to the front (at most 139 bytes).
                        this.rbuf.copy_within(this.start..this.end, 0);
                        (this.start, this.end) = (0, this.end - this.start);
                    }
                    let mut into = ReadBuf::new(&mut this.rbuf[this.end..]);
                    ready!(Pin::new(&mut this.io).poll_read(cx, &mut into))?;
                    let n = into.filled().len();
                    if n == 0 {
                        this.eof = true;
                        if !this.reader.at_boundary() || this.start < this.end {
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "websocket ended inside a frame",
                            )));
                        }
                        return Poll::Ready(Ok(()));
                    }
                    this.end += n;
                }
                Err(violation) => {
                    tracing::debug!(
                        code = violation.code,
                        reason = violation.reason,
                        "closing websocket"
                    );
                    this.queue_close(violation.code, violation.reason)?;
                    this.ending = Some(End::Violation(violation));
                }
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
        if this.close_sent {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if this.wbuf.len() - this.wpos >= WRITE_HIGH_BYTES {
            ready!(this.poll_drain(cx))?;
        }
        // One frame for the whole batch the engine hands us, sent on
        // flush: its bytes are copied once, as a TLS record's would be.
        let len = bufs.iter().map(|b| b.len()).sum();
        if len > 0 {
            this.queue_frame(Opcode::Binary, bufs)?;
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.queue_close(close_code::NORMAL, "")?;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
