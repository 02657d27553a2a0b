//! Outgoing bytes of one connection: small frames are encoded into one
//! buffer, large payloads ride along as their own `Bytes` chunks, and the
//! lot is written with vectored writes, so a message body is never copied
//! on its way out.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncWriteExt;

use super::transport::ByteStream;

use crate::codec::frame::{
    encode_amqp_frame, encode_empty_frame, encode_sasl_frame, encode_transfer_frame,
};
use crate::codec::{Performative, SaslFrame, TransferHead};

/// Payloads up to this size are copied into the frame buffer: cheaper than
/// an extra iovec entry.
const INLINE_PAYLOAD_MAX_BYTES: usize = 2048;
/// Most iovec entries handed to one write call.
const IOVEC_MAX: usize = 64;

/// Pending output of one connection.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    buf: BytesMut,
    chunks: VecDeque<Bytes>,
}

impl Outbox {
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.chunks.is_empty()
    }

    /// Raw bytes (protocol headers).
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// A frame without payload.
    pub(crate) fn frame(&mut self, channel: u16, performative: &Performative) {
        tracing::trace!(channel, ?performative, "sending");
        encode_amqp_frame(&mut self.buf, channel, performative, 0);
    }

    /// A delivery's transfer frame (see [`TransferHead`]) with its payload.
    pub(crate) fn transfer(&mut self, channel: u16, head: &TransferHead<'_>, payload: &[Bytes]) {
        let len = payload.iter().map(Bytes::len).sum();
        tracing::trace!(channel, ?head, payload_bytes = len, "sending");
        encode_transfer_frame(&mut self.buf, channel, head, len);
        self.payload(payload);
    }

    /// The payload of the frame just encoded: copied when small, else
    /// queued as its own chunk.
    fn payload(&mut self, payload: &[Bytes]) {
        for part in payload {
            if part.len() <= INLINE_PAYLOAD_MAX_BYTES {
                self.buf.extend_from_slice(part);
            } else {
                if !self.buf.is_empty() {
                    self.chunks.push_back(self.buf.split().freeze());
                }
                self.chunks.push_back(part.clone());
            }
        }
    }

    pub(crate) fn sasl(&mut self, frame: &SaslFrame) {
        encode_sasl_frame(&mut self.buf, frame);
    }

    pub(crate) fn heartbeat(&mut self) {
        encode_empty_frame(&mut self.buf);
    }

    /// Write everything out, and flush the stream: a transport that
    /// buffers (a WebSocket's message writer) sends only on flush; on TCP
    /// the flush costs nothing.
    pub(crate) async fn flush(&mut self, mut stream: &mut dyn ByteStream) -> std::io::Result<()> {
        if self.chunks.is_empty() {
            // The common case: one buffer, one write. On a bare TCP socket
            // it is tried at once, without the future machinery (a TCP
            // stream's flush does nothing); what it could not take goes
            // the general way.
            if let Some(tcp) = stream.as_tcp() {
                match tcp.try_write(&self.buf) {
                    Ok(n) if n == self.buf.len() => {
                        self.buf.clear();
                        return Ok(());
                    }
                    Ok(n) => self.buf.advance(n),
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
            (&mut stream).write_all_buf(&mut self.buf).await?;
            self.buf.clear();
            return stream.flush().await;
        }
        if !self.buf.is_empty() {
            self.chunks.push_back(self.buf.split().freeze());
        }
        while !self.chunks.is_empty() {
            let slices: Vec<IoSlice<'_>> = self
                .chunks
                .iter()
                .take(IOVEC_MAX)
                .map(|c| IoSlice::new(c))
                .collect();
            let mut written = stream.write_vectored(&slices).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            while written > 0 {
                let Some(front) = self.chunks.front_mut() else {
                    break;
                };
                if written >= front.len() {
                    written -= front.len();
                    self.chunks.pop_front();
                } else {
                    front.advance(written);
                    written = 0;
                }
            }
        }
        stream.flush().await
    }
}
