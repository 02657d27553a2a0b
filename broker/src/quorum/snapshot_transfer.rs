//! The stream a leader sends a follower that is behind its log purge: the
//! bodies themselves, since segment locations mean nothing on another
//! replica. Written from an index and a segment reader into a file (never
//! all in memory), and read back record by record on the follower, which
//! pages every body into fresh segments of its own.
//!
//! Layout: magic, count u64 LE, then per message id u64 LE,
//! delivery-count u32 LE, (with the second magic only) its expiry u64 LE,
//! length u32 LE and the bytes; a CRC32C of everything before it last. The follower checks the CRC at the end and
//! only then swaps the result in. With the dead-letter magic (only when
//! the queue has dead-letter state) the expiring layout is followed, before
//! the CRC, by the dead-letter state (`dead_letters.rs`) as a u64 LE
//! length and bytes.
//!
//! It must not know about openraft's chunking (the caller streams the file).

use std::io::{self, Read, Write};

use super::dead_letters::DeadLetters;
use super::index::{MessageIndex, Placement};
use crate::paging::StoreReader;

const MAGIC: &[u8; 8] = b"RAMQPT01";
/// The same with each message's expiry (ms since the epoch, 0: never);
/// used only when a message has one.
const MAGIC_EXPIRING: &[u8; 8] = b"RAMQPT02";
/// The expiring layout plus the dead-letter section.
const MAGIC_DEAD_LETTERS: &[u8; 8] = b"RAMQPT03";
/// The dead-letter section is refused past this (the recent keys take
/// 1 MiB; the rest is 25 bytes per message in the outbox).
const DEAD_LETTERS_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Why a transfer could not be written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransferError {
    #[error("snapshot transfer io: {0}")]
    Io(#[from] io::Error),
    #[error("reading message {id} for a snapshot transfer: {source}")]
    Body {
        id: u64,
        source: crate::paging::StoreError,
    },
    #[error("message {0} has no body on this replica")]
    Missing(u64),
    #[error("snapshot transfer is not a quorum queue transfer")]
    Magic,
    #[error("snapshot transfer checksum mismatch")]
    Checksum,
    #[error("snapshot transfer record of {0} bytes is over the limit")]
    TooLarge(u32),
    #[error("snapshot transfer ids out of order at {0}")]
    Order(u64),
    #[error("snapshot transfer dead-letter section is malformed or too large")]
    DeadLetters,
}

struct CrcWriter<'a, W: Write> {
    out: &'a mut W,
    crc: u32,
}

impl<W: Write> CrcWriter<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.out.write_all(bytes)
    }
}

/// Write every live message of `index`, bodies read from memory or
/// through `reader`, into `out`.
pub(crate) fn write(
    out: &mut impl Write,
    index: &MessageIndex,
    reader: &StoreReader,
) -> Result<(), TransferError> {
    let mut w = CrcWriter { out, crc: 0 };
    let dead_letters = !index.dead_letters().is_empty();
    let expiring = dead_letters || index.has_expiries();
    let magic = match (dead_letters, expiring) {
        (true, _) => MAGIC_DEAD_LETTERS,
        (false, true) => MAGIC_EXPIRING,
        (false, false) => MAGIC,
    };
    w.put(magic)?;
    w.put(&(index.len() as u64).to_le_bytes())?;
    for (slot, resident) in index.iter_with_bodies() {
        let body =
            match slot.placement {
                Placement::Resident => resident,
                Placement::Paged => {
                    Some(reader.read(slot.location, slot.id).map_err(|source| {
                        TransferError::Body {
                            id: slot.id,
                            source,
                        }
                    })?)
                }
                Placement::Missing | Placement::Dead => None,
            };
        let body = body.ok_or(TransferError::Missing(slot.id))?;
        w.put(&slot.id.to_le_bytes())?;
        w.put(&slot.delivery_count.to_le_bytes())?;
        if expiring {
            w.put(&index.expires_at(slot.id).to_le_bytes())?;
        }
        w.put(&(body.len() as u32).to_le_bytes())?;
        w.put(&body)?;
    }
    if dead_letters {
        let dead = index.dead_letters().encode();
        w.put(&(dead.len() as u64).to_le_bytes())?;
        w.put(&dead)?;
    }
    let crc = w.crc;
    w.out.write_all(&crc.to_le_bytes())?;
    Ok(())
}

struct CrcReader<R: Read> {
    input: R,
    crc: u32,
}

impl<R: Read> CrcReader<R> {
    fn take(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.input.read_exact(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(())
    }

    fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
}

/// Read a transfer from `input`, handing each message (id, delivery-count,
/// expiry or 0, body) to `each` in order; bodies over `max_body_bytes` are refused
/// before anything is allocated for them. The caller must discard what
/// `each` built unless this returns `Ok`.
pub(crate) fn read<E>(
    input: impl Read,
    max_body_bytes: u32,
    mut each: impl FnMut(u64, u32, u64, &[u8]) -> Result<(), E>,
) -> Result<Result<(u64, DeadLetters), E>, TransferError> {
    let mut r = CrcReader { input, crc: 0 };
    let mut magic = [0u8; 8];
    r.take(&mut magic)?;
    let (expiring, dead_letters) = match &magic {
        m if m == MAGIC => (false, false),
        m if m == MAGIC_EXPIRING => (true, false),
        m if m == MAGIC_DEAD_LETTERS => (true, true),
        _ => return Err(TransferError::Magic),
    };
    let count = r.u64()?;
    let mut body = Vec::new();
    let mut previous = None;
    for _ in 0..count {
        let id = r.u64()?;
        if previous.is_some_and(|p| p >= id) {
            return Err(TransferError::Order(id));
        }
        previous = Some(id);
        let delivery_count = r.u32()?;
        let expires_at = if expiring { r.u64()? } else { 0 };
        let len = r.u32()?;
        if len > max_body_bytes {
            return Err(TransferError::TooLarge(len));
        }
        body.resize(len as usize, 0);
        r.take(&mut body)?;
        if let Err(e) = each(id, delivery_count, expires_at, &body) {
            return Ok(Err(e));
        }
    }
    let mut dead = DeadLetters::default();
    if dead_letters {
        let len = r.u64()?;
        if len > DEAD_LETTERS_MAX_BYTES {
            return Err(TransferError::DeadLetters);
        }
        body.resize(len as usize, 0);
        r.take(&mut body)?;
        dead = DeadLetters::decode(&body).ok_or(TransferError::DeadLetters)?;
    }
    let crc = r.crc;
    let mut stored = [0u8; 4];
    r.input.read_exact(&mut stored)?;
    if u32::from_le_bytes(stored) != crc {
        return Err(TransferError::Checksum);
    }
    Ok(Ok((count, dead)))
}
