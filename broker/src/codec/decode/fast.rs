//! A fast path for the two performatives of every message, `transfer` and
//! `disposition`, in the encodings peers use for them: a small-ulong
//! descriptor, a list8, fields as null, true/false, uint0/smalluint/uint,
//! vbin8, and (disposition) an `accepted` or `released` state with a list0
//! body. It reads a plain slice with one bounds check per byte instead of
//! the general cursor's per-field machinery, which made up most of the
//! decoding cost of a message.
//!
//! It only ever answers for input the general decoder would decode without
//! error, and then with the same value and the same bytes consumed; for
//! anything else (another encoding, a malformed list, a field it does not
//! know) it answers `None` and the caller decodes the general way, so every
//! error and every rarer encoding stays the general decoder's.

use bytes::{Buf, Bytes};

use crate::codec::codes::{dc, fc};
use crate::codec::definitions::{DeliveryState, Role};
use crate::codec::performative::{Disposition, Performative, Transfer};

/// Fields of a transfer and of a disposition.
const TRANSFER_FIELDS: usize = 11;
const DISPOSITION_FIELDS: usize = 6;

/// The fields of one list8, read front to back; `None` from a reader
/// means "not the simple case": give up.
struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where the list ends (its size byte counted from the count byte).
    end: usize,
    /// Fields the list holds that were not read yet.
    remaining: usize,
}

impl<'a> Fields<'a> {
    /// The next byte of the list, if there is one.
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos).filter(|_| self.pos < self.end)?;
        self.pos += 1;
        Some(b)
    }

    /// The next field's constructor, or null for a field beyond the
    /// list's count (absent: its default).
    fn code(&mut self) -> Option<u8> {
        if self.remaining == 0 {
            return Some(fc::NULL);
        }
        self.remaining -= 1;
        self.byte()
    }

    fn opt_uint(&mut self) -> Option<Option<u32>> {
        match self.code()? {
            fc::NULL => Some(None),
            fc::UINT0 => Some(Some(0)),
            fc::SMALLUINT => Some(Some(u32::from(self.byte()?))),
            fc::UINT => {
                let b = self.bytes.get(self.pos..self.pos + 4)?;
                if self.pos + 4 > self.end {
                    return None;
                }
                self.pos += 4;
                Some(Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            }
            _ => None,
        }
    }

    fn opt_bool(&mut self) -> Option<Option<bool>> {
        match self.code()? {
            fc::NULL => Some(None),
            fc::TRUE => Some(Some(true)),
            fc::FALSE => Some(Some(false)),
            _ => None,
        }
    }

    fn flag(&mut self) -> Option<bool> {
        Some(self.opt_bool()?.unwrap_or(false))
    }

    /// A vbin8 or null: the range of its bytes within the input.
    fn opt_binary(&mut self) -> Option<Option<std::ops::Range<usize>>> {
        match self.code()? {
            fc::NULL => Some(None),
            fc::VBIN8 => {
                let len = usize::from(self.byte()?);
                let start = self.pos;
                if start + len > self.end {
                    return None;
                }
                self.pos += len;
                Some(Some(start..start + len))
            }
            _ => None,
        }
    }

    /// Null only: a field the fast path does not decode otherwise.
    fn null(&mut self) -> Option<()> {
        (self.code()? == fc::NULL).then_some(())
    }

    /// A delivery state of an outcome without fields (`accepted`,
    /// `released`), described by a small ulong, with a list0 body.
    fn opt_plain_state(&mut self) -> Option<Option<DeliveryState>> {
        match self.code()? {
            fc::NULL => Some(None),
            fc::DESCRIBED => {
                if self.byte()? != fc::SMALLULONG {
                    return None;
                }
                let code = u64::from(self.byte()?);
                if self.byte()? != fc::LIST0 {
                    return None;
                }
                match code {
                    dc::ACCEPTED => Some(Some(DeliveryState::Accepted)),
                    dc::RELEASED => Some(Some(DeliveryState::Released)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether the whole list was read, exactly.
    fn done(&self) -> bool {
        self.remaining == 0 && self.pos == self.end
    }
}

/// Decode a transfer or disposition from the front of `input` if it is
/// in the simple encoding, advancing `input` past it; else leave `input`
/// as it is and return `None`.
pub(crate) fn decode(input: &mut Bytes) -> Option<Performative> {
    let bytes = &input[..];
    let (code, size, count) = match bytes {
        [fc::DESCRIBED, fc::SMALLULONG, code, fc::LIST8, size, count, ..] => {
            (*code, usize::from(*size), usize::from(*count))
        }
        _ => return None,
    };
    // As the general decoder: the size counts the count byte and must be
    // present; every field takes at least one byte.
    if size < 1 || 5 + size > bytes.len() || count > size - 1 {
        return None;
    }
    let (known, code) = match u64::from(code) {
        dc::TRANSFER => (TRANSFER_FIELDS, dc::TRANSFER),
        dc::DISPOSITION => (DISPOSITION_FIELDS, dc::DISPOSITION),
        _ => return None,
    };
    if count > known {
        return None;
    }
    let mut f = Fields {
        bytes,
        pos: 6,
        end: 5 + size,
        remaining: count,
    };
    let (performative, tag) = if code == dc::TRANSFER {
        transfer(&mut f)?
    } else {
        (disposition(&mut f)?, None)
    };
    if !f.done() {
        return None;
    }
    let end = f.end;
    let performative = match (performative, tag) {
        (Performative::Transfer(mut transfer), Some(tag)) => {
            transfer.delivery_tag = Some(input.slice(tag));
            Performative::Transfer(transfer)
        }
        (performative, _) => performative,
    };
    input.advance(end);
    Some(performative)
}

/// The fields of a transfer; the tag as a range of the input.
fn transfer(f: &mut Fields<'_>) -> Option<(Performative, Option<std::ops::Range<usize>>)> {
    // Mandatory: a null handle is the general decoder's error to report.
    let handle = f.opt_uint()??;
    let delivery_id = f.opt_uint()?;
    let tag = f.opt_binary()?;
    let message_format = f.opt_uint()?;
    let settled = f.opt_bool()?;
    let more = f.flag()?;
    f.null()?; // rcv-settle-mode
    f.null()?; // state
    let resume = f.flag()?;
    let aborted = f.flag()?;
    let batchable = f.flag()?;
    let transfer = Transfer {
        handle,
        delivery_id,
        delivery_tag: None,
        message_format,
        settled,
        more,
        rcv_settle_mode: None,
        state: None,
        resume,
        aborted,
        batchable,
    };
    Some((Performative::Transfer(transfer), tag))
}

fn disposition(f: &mut Fields<'_>) -> Option<Performative> {
    let role = if f.opt_bool()?? {
        Role::Receiver
    } else {
        Role::Sender
    };
    let first = f.opt_uint()??;
    let last = f.opt_uint()?;
    let settled = f.flag()?;
    let state = f.opt_plain_state()?;
    let batchable = f.flag()?;
    Some(Performative::Disposition(Disposition {
        role,
        first,
        last,
        settled,
        state,
        batchable,
    }))
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
