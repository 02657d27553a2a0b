//! [`SmallFrame`]: a whole AMQP frame with a short performative (a
//! delivery's transfer, a disposition), built in a stack array and
//! appended to the output in one copy. The general writer
//! ([`CompositeWriter`](super::CompositeWriter)) grows the output byte by
//! byte, each write checking its capacity; for the two frames of every
//! message that was most of their encoding cost.
//!
//! It writes the same bytes as the general writer for the fields it knows
//! (nulls for defaults, trailing nulls trimmed, list0 when nothing is
//! left, list8 otherwise: its bodies are always far below 255 bytes); the
//! tests in `frame.rs` compare the two.

use bytes::BytesMut;

use crate::codec::codes::fc;

/// The longest binary field a small frame takes (a delivery-tag is at
/// most 32 bytes, transport 2.8.7); callers use the general writer for
/// longer ones.
pub(crate) const SMALL_BINARY_MAX: usize = 32;
/// Room for a frame header, a descriptor, a list8 header and up to 11
/// small fields, one of them a binary of [`SMALL_BINARY_MAX`] bytes.
const SMALL_FRAME_MAX: usize = 96;
/// Where the list constructor sits: after the 8-byte frame header and the
/// 3-byte descriptor.
const LIST_AT: usize = 11;

/// A frame being written: header, descriptor, list8 header, fields.
pub(crate) struct SmallFrame {
    buf: [u8; SMALL_FRAME_MAX],
    len: usize,
    /// Length after the last non-null field, and that field's number.
    kept_len: usize,
    kept_count: u8,
    fields: u8,
}

impl SmallFrame {
    /// An AMQP frame on `channel` whose performative has the descriptor
    /// `code` (a small ulong).
    pub(crate) fn begin(channel: u16, code: u8) -> Self {
        let mut buf = [0u8; SMALL_FRAME_MAX];
        let [c0, c1] = channel.to_be_bytes();
        // Size (patched by `finish`), doff 2, type AMQP, channel.
        buf[..LIST_AT + 3].copy_from_slice(&[
            0,
            0,
            0,
            0,
            2,
            0,
            c0,
            c1,
            fc::DESCRIBED,
            fc::SMALLULONG,
            code,
            fc::LIST8,
            0,
            0,
        ]);
        SmallFrame {
            buf,
            len: LIST_AT + 3,
            kept_len: LIST_AT + 3,
            kept_count: 0,
            fields: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Close the field just written: remember it unless it is null.
    fn mark(&mut self, null: bool) {
        self.fields += 1;
        if !null {
            self.kept_len = self.len;
            self.kept_count = self.fields;
        }
    }

    pub(crate) fn null(&mut self) -> &mut Self {
        self.put(&[fc::NULL]);
        self.mark(true);
        self
    }

    pub(crate) fn uint(&mut self, v: u32) -> &mut Self {
        match v {
            0 => self.put(&[fc::UINT0]),
            1..=255 => self.put(&[fc::SMALLUINT, v as u8]),
            _ => {
                let [a, b, c, d] = v.to_be_bytes();
                self.put(&[fc::UINT, a, b, c, d]);
            }
        }
        self.mark(false);
        self
    }

    pub(crate) fn opt_uint(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(v) => self.uint(v),
            None => self.null(),
        }
    }

    /// A mandatory boolean (e.g. role): always written.
    pub(crate) fn boolean(&mut self, v: bool) -> &mut Self {
        self.put(&[if v { fc::TRUE } else { fc::FALSE }]);
        self.mark(false);
        self
    }

    pub(crate) fn opt_bool(&mut self, v: Option<bool>) -> &mut Self {
        match v {
            Some(v) => self.boolean(v),
            None => self.null(),
        }
    }

    /// A boolean that defaults to false: null when false.
    pub(crate) fn flag(&mut self, v: bool) -> &mut Self {
        self.opt_bool(v.then_some(true))
    }

    /// A binary of at most [`SMALL_BINARY_MAX`] bytes (the caller checks).
    pub(crate) fn opt_binary(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            Some(v) => {
                debug_assert!(v.len() <= SMALL_BINARY_MAX);
                self.put(&[fc::VBIN8, v.len() as u8]);
                self.put(v);
                self.mark(false);
                self
            }
            None => self.null(),
        }
    }

    /// A described composite without fields (e.g. `accepted`): descriptor
    /// `code` and a list0.
    pub(crate) fn empty_composite(&mut self, code: u8) -> &mut Self {
        self.put(&[fc::DESCRIBED, fc::SMALLULONG, code, fc::LIST0]);
        self.mark(false);
        self
    }

    /// Trim trailing nulls, patch the list header and the frame size
    /// (counting `payload_len` bytes the caller appends right after), and
    /// append the frame to `out`.
    pub(crate) fn finish(&mut self, out: &mut BytesMut, payload_len: usize) {
        self.len = self.kept_len;
        if self.kept_count == 0 {
            self.buf[LIST_AT] = fc::LIST0;
            self.len = LIST_AT + 1;
        } else {
            // The list's size counts its count byte.
            self.buf[LIST_AT + 1] = (self.len - (LIST_AT + 3) + 1) as u8;
            self.buf[LIST_AT + 2] = self.kept_count;
        }
        let size = self.len + payload_len;
        debug_assert!(u32::try_from(size).is_ok(), "frame larger than 4 GiB");
        self.buf[..4].copy_from_slice(&(size as u32).to_be_bytes());
        out.extend_from_slice(&self.buf[..self.len]);
    }
}
