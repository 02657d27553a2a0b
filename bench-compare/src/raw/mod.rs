//! `raw`: a minimal, fast AMQP 1.0 client written directly on the broker's
//! public codec (`broker::codec`), so the bench can measure a broker without
//! a general-purpose client's per-message overhead dominating the numbers.
//!
//! It is a correct, general client for one session per connection, usable
//! against any AMQP 1.0 broker:
//!
//! * SASL PLAIN (from the URL's `user:pass`) or ANONYMOUS; open / begin;
//!   heartbeats (an empty frame whenever we were idle for half the peer's
//!   idle-time-out, from a small timer task);
//! * session windows: never more transfers than the peer's incoming window;
//!   our own incoming window re-opened with a session `flow` at half;
//! * senders ([`Sender`]): link credit honoured (never sends beyond it),
//!   pre-settled or unsettled publishing with any number in flight, `drain`
//!   and `echo` answered, messages split into frames of the peer's
//!   max-frame-size;
//! * receivers ([`Receiver`]): a credit window topped up as deliveries are
//!   taken, multi-frame (`more`) and aborted transfers, accepts batched into
//!   ranged `disposition`s of consecutive delivery ids;
//! * clean detach / end / close, each answered and awaited.
//!
//! Execution model: no background task on the data path. Every call runs
//! on the caller's task; frames are encoded into one write buffer and written
//! with one `write_all` per batch (when the buffer passes 64 KiB, on
//! [`Connection::flush`], or before any wait for the peer). A connection is
//! used by one task at a time (`&mut Connection`); a [`Sender`] or
//! [`Receiver`] is a handle into it. Every wait is bounded by the timeout
//! given to [`Connection::connect`].

pub mod connection;
pub mod receiver;
pub mod sender;
mod session;

use anyhow::{bail, Result};
use bytes::{BufMut, Bytes, BytesMut};

pub use connection::Connection;
pub use receiver::{Delivery, Receiver};
pub use sender::Sender;

/// The client stack as named in results.
pub fn client_stack() -> String {
    format!(
        "ramqp-raw (broker::codec) {} (tokio {})",
        env!("CARGO_PKG_VERSION"),
        env!("BENCH_TOKIO_VERSION")
    )
}

/// Bytes a `data` section adds in front of a body of `len` bytes.
pub(crate) fn data_section_overhead(len: usize) -> usize {
    if len < 256 {
        5
    } else {
        8
    }
}

/// Append a `data` section (described binary, 0x75) holding `body`.
pub(crate) fn put_data_section(out: &mut BytesMut, body: &[u8]) {
    out.put_slice(&[0x00, 0x53, 0x75]);
    if body.len() < 256 {
        out.put_u8(0xa0);
        out.put_u8(body.len() as u8);
    } else {
        out.put_u8(0xb0);
        out.put_u32(body.len() as u32);
    }
    out.put_slice(body);
}

/// The body of an encoded message: its `data` section (zero-copy), or
/// several `data` sections joined. Other sections (header, annotations,
/// properties, footer) are skipped; a message without a `data` body (an
/// `amqp-value` or `amqp-sequence`) is an error.
pub fn data_body(message: &Bytes) -> Result<Bytes> {
    let mut pos = 0usize;
    let mut found: Vec<Bytes> = Vec::new();
    while pos < message.len() {
        if message[pos] != 0x00 {
            bail!("message section at byte {pos} is not a described value");
        }
        let descriptor_at = pos + 1;
        let code = match message.get(descriptor_at) {
            Some(0x53) => message.get(descriptor_at + 1).map(|c| u64::from(*c)),
            Some(0x80) => message
                .get(descriptor_at + 1..descriptor_at + 9)
                .map(|b| b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x))),
            _ => None,
        };
        let value_at = skip_value(message, descriptor_at)?;
        let end = skip_value(message, value_at)?;
        if code == Some(0x75) {
            let data_at = match message.get(value_at) {
                Some(0xa0) => 2,
                Some(0xb0) => 5,
                _ => bail!("data section does not hold a binary"),
            };
            found.push(message.slice(value_at + data_at..end));
        }
        pos = end;
    }
    match found.len() {
        0 => bail!("message has no data section"),
        1 => Ok(found.swap_remove(0)),
        _ => Ok(Bytes::from(found.concat())),
    }
}

/// Position just past the AMQP-encoded value starting at `pos`, from its
/// constructor's width class (types 1.2: the high nibble gives the width).
fn skip_value(buf: &[u8], pos: usize) -> Result<usize> {
    let Some(&constructor) = buf.get(pos) else {
        bail!("truncated message: value expected at byte {pos}");
    };
    let at = pos + 1;
    let read_len = |width: usize| -> Result<usize> {
        let Some(bytes) = buf.get(at..at + width) else {
            bail!("truncated message: length at byte {at}");
        };
        Ok(bytes
            .iter()
            .fold(0usize, |acc, x| (acc << 8) | usize::from(*x)))
    };
    let end = match constructor {
        0x00 => {
            let value_at = skip_value(buf, at)?;
            return skip_value(buf, value_at);
        }
        0x40..=0x4f => at,
        0x50..=0x5f => at + 1,
        0x60..=0x6f => at + 2,
        0x70..=0x7f => at + 4,
        0x80..=0x8f => at + 8,
        0x90..=0x9f => at + 16,
        0xa0..=0xaf | 0xc0..=0xcf | 0xe0..=0xef => at + 1 + read_len(1)?,
        0xb0..=0xbf | 0xd0..=0xdf | 0xf0..=0xff => at + 4 + read_len(4)?,
        other => bail!("invalid constructor 0x{other:02x} at byte {pos}"),
    };
    if end > buf.len() {
        bail!("truncated message: value at byte {pos} runs past the end");
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_section_round_trips() {
        for len in [0usize, 28, 255, 256, 5000] {
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut out = BytesMut::new();
            // A header section and message annotations in front, a footer after.
            out.put_slice(&[0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x41]);
            out.put_slice(&[0x00, 0x53, 0x72, 0xc1, 0x01, 0x00]);
            put_data_section(&mut out, &body);
            assert_eq!(out.len(), 13 + data_section_overhead(len) + len);
            out.put_slice(&[0x00, 0x53, 0x78, 0x40]);
            let message = out.freeze();
            assert_eq!(data_body(&message).ok().as_deref(), Some(&body[..]));
        }
    }

    #[test]
    fn bad_messages_are_errors() {
        assert!(data_body(&Bytes::from_static(&[0x00, 0x53, 0x75, 0xa0, 0x05, 1])).is_err());
        assert!(data_body(&Bytes::from_static(&[0x00, 0x53, 0x77, 0xa1, 0x00])).is_err());
        assert!(data_body(&Bytes::from_static(&[0x53])).is_err());
    }
}
