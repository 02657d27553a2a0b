//! A replica's own snapshot file: openraft's snapshot meta, the generation
//! of the segment directory it refers to, and the index: per live message
//! its id, delivery-count and where its body is (a location in this
//! replica's segment files, or the body itself when resident). Bodies in
//! segments are not copied, so its size is O(messages), a few bytes each,
//! plus the resident budget.
//!
//! Layout: meta length u32 LE, postcard meta, then the index section:
//! magic, generation u64 LE, count u64 LE, the entries, and a CRC32C of
//! the index section. An entry is a flags byte, then LEB128 varints: id
//! minus the previous id; the delivery-count if not 0; the expiry (ms
//! since the epoch) if the message has one; for a resident
//! body its length and bytes; for a paged one the location, written out
//! only when it does not directly follow the previous paged record.
//! With the dead-letter magic (written only when the queue has a
//! dead-letter outbox or recent keys), the entries are followed by the
//! dead-letter state (`dead_letters.rs`) as a u64 LE length and bytes.
//!
//! It must not know how the files it names are read, or anything of Raft
//! beyond carrying the meta.

use std::io::{self, Write};

use bytes::Bytes;

use super::dead_letters::DeadLetters;
use super::index::{MessageIndex, Placement, Slot};
use crate::paging::Location;

type Meta = openraft::alias::SnapshotMetaOf<super::types::QueueRaft>;

const MAGIC: &[u8; 8] = b"RAMQPQ02";
/// The same layout where entries may carry an expiry (flag `EXPIRES`);
/// written only when a message has one, so a file without any reads in
/// a version that knows only `MAGIC`.
const MAGIC_EXPIRING: &[u8; 8] = b"RAMQPQ03";
/// The expiring layout followed by the dead-letter section; written only
/// when there is dead-letter state, so other files read in versions that
/// know only the two above.
const MAGIC_DEAD_LETTERS: &[u8; 8] = b"RAMQPQ04";

const RESIDENT: u8 = 1;
const COUNTED: u8 = 2;
const MISSING: u8 = 4;
const EXPLICIT_LOCATION: u8 = 8;
const EXPIRES: u8 = 16;

/// Why a snapshot file could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotFileError {
    #[error("snapshot file truncated")]
    Truncated,
    #[error("snapshot file is not a version-2 or -3 quorum queue snapshot")]
    Magic,
    #[error("snapshot file checksum mismatch")]
    Checksum,
    #[error("snapshot meta: {0}")]
    Meta(#[from] postcard::Error),
    #[error("snapshot entry {0} is malformed")]
    Entry(u64),
    #[error("snapshot dead-letter section is malformed")]
    DeadLetters,
}

/// What a snapshot file holds.
pub(crate) struct SnapshotFile {
    pub(crate) meta: Meta,
    /// The segment directory generation its locations refer to.
    pub(crate) generation: u64,
    pub(crate) index: MessageIndex,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn follows(previous: Option<Location>, location: Location) -> bool {
    previous.is_some_and(|p| {
        p.segment == location.segment
            && p.ordinal.checked_add(1) == Some(location.ordinal)
            && u64::from(p.offset) + p.record_bytes() == u64::from(location.offset)
    })
}

/// Write the snapshot file into `out` (buffered by the caller), streaming
/// the index: memory stays O(one entry).
pub(crate) fn write(
    out: &mut impl Write,
    meta: &Meta,
    generation: u64,
    index: &MessageIndex,
) -> io::Result<()> {
    let meta_bytes =
        postcard::to_allocvec(meta).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut crc = 0u32;
    let mut section = |out: &mut dyn Write, bytes: &[u8]| -> io::Result<()> {
        crc = crc32c::crc32c_append(crc, bytes);
        out.write_all(bytes)
    };
    section(out, &(meta_bytes.len() as u32).to_le_bytes())?;
    section(out, &meta_bytes)?;
    let dead_letters = !index.dead_letters().is_empty();
    let expiring = dead_letters || index.has_expiries();
    let magic = match (dead_letters, expiring) {
        (true, _) => MAGIC_DEAD_LETTERS,
        (false, true) => MAGIC_EXPIRING,
        (false, false) => MAGIC,
    };
    section(out, magic)?;
    section(out, &generation.to_le_bytes())?;
    section(out, &(index.len() as u64).to_le_bytes())?;
    let mut previous_id = 0u64;
    let mut previous_location = None;
    let mut entry = Vec::with_capacity(64);
    for (slot, resident) in index.iter_with_bodies() {
        entry.clear();
        let mut flags = 0u8;
        if slot.delivery_count != 0 {
            flags |= COUNTED;
        }
        let expires_at = index.expires_at(slot.id);
        if expires_at != 0 {
            flags |= EXPIRES;
        }
        let body = match slot.placement {
            Placement::Resident => {
                flags |= RESIDENT;
                resident
            }
            Placement::Missing => {
                flags |= MISSING;
                None
            }
            Placement::Paged | Placement::Dead => None,
        };
        let paged = flags & RESIDENT == 0;
        if paged && !follows(previous_location, slot.location) {
            flags |= EXPLICIT_LOCATION;
        }
        entry.push(flags);
        put_varint(&mut entry, slot.id - previous_id);
        previous_id = slot.id;
        if slot.delivery_count != 0 {
            put_varint(&mut entry, u64::from(slot.delivery_count));
        }
        if expires_at != 0 {
            put_varint(&mut entry, expires_at);
        }
        if paged {
            if flags & EXPLICIT_LOCATION != 0 {
                put_varint(&mut entry, u64::from(slot.location.segment));
                put_varint(&mut entry, u64::from(slot.location.offset));
                put_varint(&mut entry, u64::from(slot.location.ordinal));
            }
            put_varint(&mut entry, u64::from(slot.location.body_bytes));
            previous_location = Some(slot.location);
            section(out, &entry)?;
        } else {
            let body = body.unwrap_or_default();
            put_varint(&mut entry, body.len() as u64);
            section(out, &entry)?;
            section(out, &body)?;
        }
    }
    if dead_letters {
        let dead = index.dead_letters().encode();
        section(out, &(dead.len() as u64).to_le_bytes())?;
        section(out, &dead)?;
    }
    out.write_all(&crc.to_le_bytes())
}

/// Read what [`write`] wrote, checking the CRC (of everything before it)
/// first.
pub(crate) fn read(file: &[u8]) -> Result<SnapshotFile, SnapshotFileError> {
    if file.len() < 4 {
        return Err(SnapshotFileError::Truncated);
    }
    let (file, crc) = file.split_at(file.len() - 4);
    if crc32c::crc32c(file) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(SnapshotFileError::Checksum);
    }
    let meta_len = file
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or(SnapshotFileError::Truncated)?;
    let meta_bytes = file
        .get(4..4 + meta_len)
        .ok_or(SnapshotFileError::Truncated)?;
    let meta: Meta = postcard::from_bytes(meta_bytes)?;
    let body = &file[4 + meta_len..];
    if body.len() < MAGIC.len() + 16 {
        return Err(SnapshotFileError::Truncated);
    }
    let (expiring, dead_letters) = match &body[..8] {
        m if m == MAGIC => (false, false),
        m if m == MAGIC_EXPIRING => (true, false),
        m if m == MAGIC_DEAD_LETTERS => (true, true),
        _ => return Err(SnapshotFileError::Magic),
    };
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let generation = u64_at(8);
    let count = u64_at(16);
    let shared = Bytes::copy_from_slice(body);
    let mut at = 24;
    let mut index = MessageIndex::default();
    let mut previous_id = 0u64;
    let mut previous_location: Option<Location> = None;
    for n in 0..count {
        let bad = || SnapshotFileError::Entry(n);
        let flags = *body.get(at).ok_or_else(bad)?;
        at += 1;
        let id = previous_id
            .checked_add(get_varint(body, &mut at).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        if n > 0 && id == previous_id {
            return Err(bad());
        }
        previous_id = id;
        let delivery_count = if flags & COUNTED != 0 {
            u32::try_from(get_varint(body, &mut at).ok_or_else(bad)?).map_err(|_| bad())?
        } else {
            0
        };
        let expires_at = match flags & EXPIRES != 0 {
            true if expiring => get_varint(body, &mut at).ok_or_else(bad)?,
            true => return Err(bad()),
            false => 0,
        };
        let varint32 = |at: &mut usize| {
            get_varint(body, at)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(bad)
        };
        if flags & RESIDENT != 0 {
            let len = varint32(&mut at)? as usize;
            let end = at.checked_add(len).filter(|end| *end <= body.len());
            let end = end.ok_or_else(bad)?;
            let slot = Slot {
                id,
                location: Location {
                    segment: 0,
                    offset: 0,
                    body_bytes: len as u32,
                    ordinal: 0,
                },
                delivery_count,
                placement: Placement::Resident,
            };
            index.push(slot, Some(shared.slice(at..end)));
            index.set_expiry(id, expires_at);
            at = end;
            continue;
        }
        let location = if flags & EXPLICIT_LOCATION != 0 {
            let segment = varint32(&mut at)?;
            let offset = varint32(&mut at)?;
            let ordinal = varint32(&mut at)?;
            let body_bytes = varint32(&mut at)?;
            Location {
                segment,
                offset,
                body_bytes,
                ordinal,
            }
        } else {
            let p = previous_location.ok_or_else(bad)?;
            let offset = u64::from(p.offset) + p.record_bytes();
            Location {
                segment: p.segment,
                offset: u32::try_from(offset).map_err(|_| bad())?,
                body_bytes: varint32(&mut at)?,
                ordinal: p.ordinal.checked_add(1).ok_or_else(bad)?,
            }
        };
        previous_location = Some(location);
        let placement = if flags & MISSING != 0 {
            Placement::Missing
        } else {
            Placement::Paged
        };
        let slot = Slot {
            id,
            location,
            delivery_count,
            placement,
        };
        index.push(slot, None);
        index.set_expiry(id, expires_at);
    }
    if dead_letters {
        let len = body
            .get(at..at.saturating_add(8))
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a)
            })
            .ok_or(SnapshotFileError::Truncated)?;
        at += 8;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| at.checked_add(len))
            .filter(|end| *end <= body.len())
            .ok_or(SnapshotFileError::Truncated)?;
        *index.dead_letters_mut() =
            DeadLetters::decode(&body[at..end]).ok_or(SnapshotFileError::DeadLetters)?;
        at = end;
    }
    if at != body.len() {
        return Err(SnapshotFileError::Truncated);
    }
    Ok(SnapshotFile {
        meta,
        generation,
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(segment: u32, ordinal: u32, offset: u32, body_bytes: u32) -> Location {
        Location {
            segment,
            offset,
            body_bytes,
            ordinal,
        }
    }

    #[test]
    fn round_trip_with_every_kind_of_entry() {
        let mut index = MessageIndex::default();
        let l0 = location(3, 0, 0, 10);
        let l1 = location(3, 1, 26, 7);
        let l2 = location(5, 9, 4000, 1 << 20);
        for (id, slot_location) in [(1u64 << 16, l0), ((2 << 16) + 1, l1), (9 << 16, l2)] {
            let slot = Slot {
                id,
                location: slot_location,
                delivery_count: if id == 9 << 16 { 3 } else { 0 },
                placement: Placement::Paged,
            };
            index.push(slot, None);
        }
        let body = Bytes::from_static(b"resident body");
        let slot = Slot {
            id: 10 << 16,
            location: location(0, 0, 0, body.len() as u32),
            delivery_count: 1,
            placement: Placement::Resident,
        };
        index.push(slot, Some(body.clone()));
        index.set_missing((2 << 16) + 1);
        let meta = Meta::default();
        let mut plain = Vec::new();
        write(&mut plain, &meta, 42, &index).unwrap();
        assert!(plain.windows(8).any(|w| w == MAGIC), "no expiry: version 2");
        index.set_expiry(1 << 16, 1_700_000_000_000);
        index.set_expiry(10 << 16, 1_700_000_000_123);
        let mut file = Vec::new();
        write(&mut file, &meta, 42, &index).unwrap();
        let read_back = read(&file).unwrap();
        assert_eq!(read_back.generation, 42);
        assert_eq!(read_back.index.expires_at(1 << 16), 1_700_000_000_000);
        assert_eq!(read_back.index.expires_at(10 << 16), 1_700_000_000_123);
        assert_eq!(read_back.index.expires_at(9 << 16), 0);
        let a: Vec<Slot> = index.iter().collect();
        let b: Vec<Slot> = read_back.index.iter().collect();
        assert_eq!(a, b);
        assert_eq!(read_back.index.resident_body(10 << 16), Some(body));
        assert_eq!(read_back.index.bytes(), index.bytes());
        // Sequential locations cost a few bytes per message.
        assert!(file.len() < 200, "{}", file.len());
    }

    #[test]
    fn the_dead_letter_state_round_trips_and_only_then_changes_the_version() {
        let mut index = MessageIndex::default();
        let slot = Slot {
            id: 7 << 16,
            location: location(0, 0, 0, 5),
            delivery_count: 0,
            placement: Placement::Paged,
        };
        index.push(slot, None);
        let mut plain = Vec::new();
        write(&mut plain, &Meta::default(), 1, &index).unwrap();
        assert!(plain.windows(8).any(|w| w == MAGIC), "none: version 2");
        index.dead_letters_mut().add(
            7 << 16,
            crate::quorum::dead_letters::Outgoing {
                reason: crate::queue::dead_letter::DeathReason::DeliveryLimit,
                key: 99,
            },
        );
        index.dead_letters_mut().first_time(12345);
        let mut file = Vec::new();
        write(&mut file, &Meta::default(), 1, &index).unwrap();
        assert!(file.windows(8).any(|w| w == MAGIC_DEAD_LETTERS));
        let read_back = read(&file).unwrap();
        assert_eq!(read_back.index.dead_letters(), index.dead_letters());
        assert!(read_back.index.dead_letters().in_outbox(7 << 16));
        for len in 0..file.len() {
            assert!(read(&file[..len]).is_err());
        }
    }

    #[test]
    fn a_flipped_byte_or_a_short_file_is_refused() {
        let mut index = MessageIndex::default();
        let slot = Slot {
            id: 7,
            location: location(0, 0, 0, 5),
            delivery_count: 0,
            placement: Placement::Paged,
        };
        index.push(slot, None);
        let mut file = Vec::new();
        write(&mut file, &Meta::default(), 1, &index).unwrap();
        for at in 0..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 0x10;
            assert!(read(&bad).is_err(), "flip at {at} not detected");
        }
        for len in 0..file.len() {
            assert!(read(&file[..len]).is_err());
        }
    }
}
