//! The checks behind every fuzz target of `fuzz/` (one public function per
//! target, taking the raw fuzz input), in the library so that the
//! stable-toolchain test `tests/fuzz_corpus_replay.rs` replays the checked-in
//! corpora through the very same code. Pub for the fuzz targets, hidden from
//! the docs: nothing else calls it. A failed check panics, which is what
//! libFuzzer reports and what fails the replay test.
//!
//! Checks that need a module's private types live in that module
//! (`quorum`, `meta`, `forward`, `raft`; `store_redb` and `fabric` for
//! theirs); this module only picks, from the input's first byte where a
//! target covers several types, which one runs. It sits above every other
//! layer and nothing imports it.

mod codec;
mod seeds;

use openraft::alias::{EntryOf, LogIdOf, VoteOf};
use store_redb::fuzz_checks::{frame, record};
use store_redb::{MetaKind, RecordKey};

pub use codec::{
    dead_letter, frame_decoder, message_scan, performative_decoder, segment_record, value_decoder,
};
pub use seeds::seeds;

use crate::admin::{decode_response, AdminRequest};
use crate::meta::MetaRaft;
use crate::quorum::QueueRaft;
use crate::raft::fuzz_checks::{postcard_check, postcard_round_trip};

/// A target's check: panics when the input breaks it.
pub type Check = fn(&[u8]);

/// Every target of `fuzz/Cargo.toml` whose check lives in this crate, by
/// name (the name of its corpus directory).
pub const TARGETS: &[(&str, Check)] = &[
    ("frame_decoder", frame_decoder),
    ("value_decoder", value_decoder),
    ("performative_decoder", performative_decoder),
    ("message_scan", message_scan),
    ("segment_record", segment_record),
    ("snapshot_file", snapshot_file),
    ("snapshot_transfer", snapshot_transfer),
    ("meta_snapshot", meta_snapshot),
    ("raft_rpc", raft_rpc),
    ("forward_protocol", forward_protocol),
    ("admin_rpc", admin_rpc),
    ("store_record", store_record),
    ("store_journal", store_journal),
    ("ws_frames", ws_frames),
    ("selector_parser", selector_parser),
    ("dead_letter", dead_letter),
    ("liveness_probe", liveness_probe),
];

/// A JMS selector (`queue/filter/`): parsed and evaluated, or refused.
pub fn selector_parser(data: &[u8]) {
    crate::queue::filter::fuzz_check::selector_parser(data);
}

/// RFC 6455 frames a WebSocket peer sends (`ws/frame.rs`): the first byte
/// picks the role and message limit, the second the chunking.
pub fn ws_frames(data: &[u8]) {
    crate::ws::fuzz_check(data);
}

/// A quorum queue's snapshot file (`quorum/snapshot_file.rs`); bit 0 of
/// the first byte appends a right CRC to the rest.
pub fn snapshot_file(data: &[u8]) {
    crate::quorum::fuzz_checks::snapshot_file(data);
}

/// The snapshot body stream a leader sends a follower
/// (`quorum/snapshot_transfer.rs`); bit 0 of the first byte appends a
/// right CRC to the rest.
pub fn snapshot_transfer(data: &[u8]) {
    crate::quorum::fuzz_checks::snapshot_transfer(data);
}

/// The metadata group's snapshot (`meta/state_machine.rs`), as a file or
/// as shipped by the leader.
pub fn meta_snapshot(data: &[u8]) {
    crate::meta::fuzz_checks::snapshot(data);
}

/// The Raft RPC payloads decoded off the fabric: the first byte picks the
/// group (quorum queue or metadata) and the payload type (requests,
/// answers, the metadata group's forwarded proposals and their answers).
pub fn raft_rpc(data: &[u8]) {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        crate::raft::fuzz_checks::raft_rpc::<QueueRaft>(selector >> 1, payload);
    } else {
        crate::meta::fuzz_checks::raft_rpc(selector >> 1, payload);
    }
}

/// The node-level liveness probe and its answer
/// (`quorum/peer_liveness.rs`): bit 0 of the first byte picks which.
pub fn liveness_probe(data: &[u8]) {
    crate::quorum::fuzz_checks::liveness_probe(data);
}

/// The forwarding messages (`forward/protocol.rs`): the first byte picks
/// the message type.
pub fn forward_protocol(data: &[u8]) {
    crate::forward::fuzz_checks::protocol(data);
}

/// The admin protocol (a request decoded by the node, an answer decoded
/// by `ramqp-ctl`): bit 0 of the first byte picks which.
pub fn admin_rpc(data: &[u8]) {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        postcard_check::<AdminRequest>(payload);
    } else {
        postcard_round_trip(payload, decode_response);
    }
}

/// The log store's append journal as read at open
/// (`store_redb::fuzz_checks::journal`; the first byte picks the
/// generation and whether the rest is framed with a right CRC).
pub fn store_journal(data: &[u8]) {
    store_redb::fuzz_checks::journal(data);
}

/// Records read from the redb log store (`store_redb::record`), as the
/// types the broker stores: the first byte picks the type (bits 1..) and
/// whether the rest gets a right CRC (bit 0); the next 16 bytes are the
/// key's group id and log index.
pub fn store_record(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((key_bytes, payload)) = rest.split_first_chunk::<16>() else {
        return;
    };
    let (group_bytes, index_bytes) = key_bytes.split_at(8);
    let group_id = u64::from_le_bytes(group_bytes.try_into().unwrap_or_default());
    let index = u64::from_le_bytes(index_bytes.try_into().unwrap_or_default());
    let kind = (mode >> 1) % 5;
    let meta = |kind| RecordKey::Meta {
        group_id,
        kind: Ok(kind),
    };
    let key = match kind {
        0 => meta(MetaKind::Vote),
        1 => meta(MetaKind::Committed),
        2 => meta(MetaKind::LastPurged),
        _ => RecordKey::Entry { group_id, index },
    };
    let bytes = if mode & 1 == 1 {
        frame(key, payload)
    } else {
        payload.to_vec()
    };
    match kind {
        0 => record::<VoteOf<QueueRaft>>(key, &bytes),
        1 => record::<Option<LogIdOf<QueueRaft>>>(key, &bytes),
        2 => record::<LogIdOf<QueueRaft>>(key, &bytes),
        3 => record::<EntryOf<QueueRaft>>(key, &bytes),
        _ => record::<EntryOf<MetaRaft>>(key, &bytes),
    }
}
