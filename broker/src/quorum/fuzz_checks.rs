//! The checks the `snapshot_file`, `snapshot_transfer` and
//! `liveness_probe` fuzz targets
//! (and the corpus replay test) run on arbitrary bytes: what is accepted
//! must re-encode to the same thing, and what is refused must be refused
//! for the reason the bytes give. They live here because the snapshot
//! types are private to `quorum`; `crate::fuzz_checks` is their public
//! face. A failed check panics: that is what libFuzzer reports.
//!
//! It must not know how snapshots are stored or shipped (no files, no
//! openraft calls): bytes in, panic or return.

use bytes::Bytes;

use super::index::{MessageIndex, Placement, Slot};
use super::peer_liveness::{Probe, ProbeAnswer};
use super::snapshot_file::{self, SnapshotFileError};
use super::snapshot_transfer::{self, TransferError};
use crate::paging::{Location, StoreReader};
use crate::raft::fuzz_checks::postcard_check;

/// Body limit of the transfer check (a follower uses its
/// `max_record_bytes`; small here so that a refusal is reachable).
pub(crate) const TRANSFER_MAX_BODY_BYTES: u32 = 64 * 1024;

/// Both files end in a CRC32C of everything before it. Random bytes almost
/// never carry a right one, so when the first byte is odd the rest gets a
/// correct CRC appended and the decoder behind the check is exercised;
/// when it is even the rest is fed as it is.
fn with_crc(data: &[u8]) -> (Vec<u8>, bool) {
    let Some((&mode, rest)) = data.split_first() else {
        return (Vec::new(), false);
    };
    let mut file = rest.to_vec();
    let sealed = mode & 1 == 1;
    if sealed {
        let crc = crc32c::crc32c(&file);
        file.extend_from_slice(&crc.to_le_bytes());
    }
    (file, sealed)
}

fn crc_holds(file: &[u8]) -> bool {
    file.len() >= 4 && {
        let (body, crc) = file.split_at(file.len() - 4);
        crc32c::crc32c(body).to_le_bytes() == crc
    }
}

/// Slots and resident bodies of an index, for comparing two of them.
fn contents(index: &MessageIndex) -> Vec<(Slot, Option<Bytes>)> {
    index
        .iter()
        .map(|slot| (slot, index.resident_body(slot.id)))
        .collect()
}

/// `snapshot_file::read`: an accepted file re-writes into a file that reads
/// back to the same meta, generation and index, and writing that again
/// gives the same bytes (the writer is canonical even where the input used
/// long varints or explicit locations it need not have). A refused file is
/// refused for its checksum only when the checksum is wrong.
pub(crate) fn snapshot_file(data: &[u8]) {
    let (file, sealed) = with_crc(data);
    let read = match snapshot_file::read(&file) {
        Ok(read) => read,
        Err(SnapshotFileError::Checksum) => {
            assert!(!sealed && !crc_holds(&file), "a right CRC was refused");
            return;
        }
        Err(SnapshotFileError::Truncated) if file.len() < 4 => return,
        Err(_) => {
            assert!(crc_holds(&file), "a wrong CRC was not reported as such");
            return;
        }
    };
    assert!(crc_holds(&file), "a file with a wrong CRC was accepted");
    assert!(
        read.index.iter().all(|s| s.placement != Placement::Dead),
        "a snapshot never holds dead slots"
    );
    let mut first = Vec::new();
    snapshot_file::write(&mut first, &read.meta, read.generation, &read.index)
        .expect("an accepted snapshot re-writes");
    let again = snapshot_file::read(&first).expect("a re-written snapshot reads back");
    assert_eq!(again.meta, read.meta, "meta differs after a round trip");
    assert_eq!(again.generation, read.generation);
    assert_eq!(again.index.len(), read.index.len());
    assert_eq!(again.index.bytes(), read.index.bytes());
    assert_eq!(again.index.resident_bytes(), read.index.resident_bytes());
    assert_eq!(contents(&again.index), contents(&read.index));
    let mut second = Vec::new();
    snapshot_file::write(&mut second, &again.meta, again.generation, &again.index)
        .expect("a re-read snapshot re-writes");
    assert_eq!(first, second, "the snapshot writer is not canonical");
}

/// `snapshot_transfer::read`: the messages it hands over, written again as
/// resident bodies, give back exactly the bytes it consumed (the format has
/// no choices); a refusal names the id, the length or the magic the bytes
/// really hold.
pub(crate) fn snapshot_transfer(data: &[u8]) {
    let (stream, _) = with_crc(data);
    let mut rest: &[u8] = &stream;
    let mut messages: Vec<(u64, u32, u64, Bytes)> = Vec::new();
    let read = snapshot_transfer::read(
        &mut rest,
        TRANSFER_MAX_BODY_BYTES,
        |id, count, expires_at, body| {
            assert!(body.len() <= TRANSFER_MAX_BODY_BYTES as usize);
            messages.push((id, count, expires_at, Bytes::copy_from_slice(body)));
            Ok::<(), ()>(())
        },
    );
    let consumed = stream.len() - rest.len();
    match read {
        Ok(Ok((count, dead))) => {
            assert_eq!(count, messages.len() as u64);
            let mut index = MessageIndex::default();
            *index.dead_letters_mut() = dead;
            for (id, delivery_count, expires_at, body) in &messages {
                let slot = Slot {
                    id: *id,
                    location: Location {
                        segment: 0,
                        offset: 0,
                        body_bytes: body.len() as u32,
                        ordinal: 0,
                    },
                    delivery_count: *delivery_count,
                    placement: Placement::Resident,
                };
                index.push(slot, Some(body.clone()));
                index.set_expiry(*id, *expires_at);
            }
            let mut again = Vec::new();
            snapshot_transfer::write(&mut again, &index, &StoreReader::empty())
                .expect("resident bodies re-write without a segment");
            // The choices: a layout whose extra (expiries, dead-letter
            // state) is empty is written back in the plainer one.
            let plain_again = (stream.starts_with(b"RAMQPT02") && !index.has_expiries())
                || (stream.starts_with(b"RAMQPT03") && index.dead_letters().is_empty());
            if !plain_again {
                assert_eq!(
                    again,
                    stream[..consumed],
                    "a transfer does not re-encode to its bytes"
                );
            }
        }
        Ok(Err(())) => unreachable!("the callback never fails"),
        Err(TransferError::Magic) => {
            assert!(![&b"RAMQPT01"[..], b"RAMQPT02", b"RAMQPT03"].contains(&&stream[..8]))
        }
        Err(TransferError::DeadLetters) => assert!(stream.starts_with(b"RAMQPT03")),
        Err(TransferError::Order(id)) => {
            let last = messages.last().map(|m| m.0);
            assert!(last.is_some_and(|last| last >= id), "order refusal of {id}");
        }
        Err(TransferError::TooLarge(len)) => assert!(len > TRANSFER_MAX_BODY_BYTES),
        Err(TransferError::Io(e)) => {
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
        }
        Err(TransferError::Checksum) => {
            // The stored CRC is the last 4 bytes consumed.
            let (body, stored) = stream[..consumed].split_at(consumed - 4);
            assert_ne!(
                crc32c::crc32c(body).to_le_bytes(),
                stored,
                "a right CRC was refused"
            );
        }
        Err(e @ (TransferError::Body { .. } | TransferError::Missing(_))) => {
            panic!("a reader reports a writer's error: {e}")
        }
    }
}

/// A small index with every kind of entry the snapshot writers handle:
/// sequential and scattered paged locations, a delivery-count, a missing
/// body, resident bodies.
fn sample_index(all_resident: bool) -> MessageIndex {
    let mut index = MessageIndex::default();
    let paged = [
        (1u64 << 16, 3, 0, 0, 10),
        (1 << 16 | 1, 3, 1, 26, 7),
        (3 << 16, 5, 9, 4000, 300),
    ];
    for (n, (id, segment, ordinal, offset, body_bytes)) in paged.into_iter().enumerate() {
        let location = Location {
            segment,
            offset,
            body_bytes,
            ordinal,
        };
        let body = Bytes::from(vec![b'a' + n as u8; body_bytes as usize]);
        let (placement, body) = if all_resident {
            (Placement::Resident, Some(body))
        } else {
            (Placement::Paged, None)
        };
        let delivery_count = if n == 2 { 3 } else { 0 };
        let slot = Slot {
            id,
            location,
            delivery_count,
            placement,
        };
        index.push(slot, body);
    }
    let body = Bytes::from_static(b"resident body");
    let slot = Slot {
        id: 4 << 16,
        location: Location {
            segment: 0,
            offset: 0,
            body_bytes: body.len() as u32,
            ordinal: 0,
        },
        delivery_count: 1,
        placement: Placement::Resident,
    };
    index.push(slot, Some(body));
    if !all_resident {
        index.set_missing(1 << 16 | 1);
    }
    index
}

/// The node-level liveness probe and its answer (`peer_liveness.rs`), as
/// a peer's bytes off the fabric: bit 0 of the first byte picks which.
/// What decodes re-encodes no longer, decodes and re-encodes identically.
pub(crate) fn liveness_probe(data: &[u8]) {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        postcard_check::<Probe>(payload);
    } else {
        postcard_check::<ProbeAnswer>(payload);
    }
}

/// Valid inputs for the `snapshot_file`, `snapshot_transfer` (first byte
/// 0: the rest is fed as it is, CRC included) and `liveness_probe`
/// targets, from the real writers: the starting corpus.
pub(crate) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    use openraft::vote::leader_id_adv::CommittedLeaderId;
    use openraft::vote::RaftLeaderId;
    let meta = openraft::alias::SnapshotMetaOf::<super::QueueRaft> {
        last_log_id: Some(openraft::LogId::new(CommittedLeaderId::new(2, 1), 77)),
        last_membership: openraft::StoredMembership::new(
            Some(openraft::LogId::new(CommittedLeaderId::new(1, 1), 1)),
            openraft::Membership::new_with_defaults(vec![[1u64, 2, 3].into()], []),
        ),
    };
    for (index, generation) in [(MessageIndex::default(), 0), (sample_index(false), 7)] {
        let mut file = vec![0u8];
        if snapshot_file::write(&mut file, &meta, generation, &index).is_ok() {
            seeds.push(("snapshot_file", file));
        }
    }
    for index in [MessageIndex::default(), sample_index(true)] {
        let mut stream = vec![0u8];
        if snapshot_transfer::write(&mut stream, &index, &StoreReader::empty()).is_ok() {
            seeds.push(("snapshot_transfer", stream));
        }
    }
    let probe = Probe {
        from: 2,
        boot: 0x5eed_b007,
    };
    let answer = ProbeAnswer {
        boot: u64::MAX - 1,
        serving: true,
    };
    for (selector, bytes) in [
        (0u8, postcard::to_allocvec(&probe)),
        (1u8, postcard::to_allocvec(&answer)),
    ] {
        if let Ok(bytes) = bytes {
            let mut seed = vec![selector];
            seed.extend_from_slice(&bytes);
            seeds.push(("liveness_probe", seed));
        }
    }
    seeds
}
