//! Valid inputs for every target of this crate, made by the real encoders
//! and writers: the starting corpus under `fuzz/seeds/<target>/`, written
//! by the replay test when `RAMQP_WRITE_FUZZ_SEEDS` is set, and replayed by
//! it every run (so a seed the checks refuse fails the test).
//!
//! It must not hand-craft bytes: what a writer writes is the point.

use bytes::Bytes;
use openraft::alias::{EntryOf, LogIdOf, SnapshotMetaOf};
use openraft::error::RaftError;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId, Membership, StoredMembership, Vote};
use serde::Serialize;
use store_redb::fuzz_checks::{frame, journal_seeds};
use store_redb::{MetaKind, RecordKey};

use crate::admin::{AdminRequest, AdminResponse};
use crate::meta::{MetaCommand, MetaRaft};
use crate::net::NodeId;
use crate::quorum::{Command, QueueRaft, SettleKind};

fn log_id(term: u64, index: u64) -> LogIdOf<QueueRaft> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn membership() -> Membership<NodeId, openraft::BasicNode> {
    Membership::new_with_defaults(vec![[1u64, 2, 3].into()], [])
}

fn queue_entries() -> Vec<EntryOf<QueueRaft>> {
    let enqueue = Command::Enqueue {
        messages: vec![Bytes::from_static(b"\x00\x53\x77\xa1\x05hello")],
    };
    let settle = Command::Settle {
        ids: vec![5 << 16, (5 << 16) + 1],
        kind: SettleKind::Remove,
    };
    vec![
        Entry {
            log_id: log_id(2, 5),
            payload: EntryPayload::Normal(enqueue),
        },
        Entry {
            log_id: log_id(2, 6),
            payload: EntryPayload::Normal(settle),
        },
        Entry {
            log_id: log_id(2, 7),
            payload: EntryPayload::Membership(membership()),
        },
    ]
}

fn meta_entry() -> EntryOf<MetaRaft> {
    Entry {
        log_id: log_id(1, 3),
        payload: EntryPayload::Normal(MetaCommand::DeclareQueue {
            name: "orders".to_owned(),
            replication_factor: 3,
        }),
    }
}

fn with_selector<T: Serialize>(selector: u8, value: &T) -> Option<Vec<u8>> {
    let bytes = postcard::to_allocvec(value).ok()?;
    Some([&[selector][..], &bytes].concat())
}

/// Every seed of the targets whose check is in this crate, by target name.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = crate::quorum::fuzz_checks::seeds();
    seeds.extend(crate::meta::fuzz_checks::seeds());
    seeds.extend(crate::forward::fuzz_checks::seeds());
    seeds.extend(crate::ws::fuzz_seeds());
    seeds.extend(crate::queue::filter::fuzz_check::seeds());
    seeds.extend(super::codec::dead_letter_seeds());
    let vote = Vote::new_committed(2, 1);
    let snapshot_meta = SnapshotMetaOf::<QueueRaft> {
        last_log_id: Some(log_id(2, 7)),
        last_membership: StoredMembership::new(Some(log_id(1, 1)), membership()),
    };
    // raft_rpc: selector 2n for the quorum group's payload type n, 2n + 1
    // for the metadata group's.
    let queue_append = AppendEntriesRequest::<QueueRaft> {
        vote,
        prev_log_id: Some(log_id(2, 4)),
        entries: queue_entries(),
        leader_commit: Some(log_id(2, 4)),
    };
    let meta_append = AppendEntriesRequest::<MetaRaft> {
        vote,
        prev_log_id: None,
        entries: vec![meta_entry()],
        leader_commit: None,
    };
    let install = crate::raft::SnapshotChunk::<QueueRaft> {
        vote,
        meta: snapshot_meta,
        offset: 0,
        data: b"RAMQPT01".to_vec(),
        done: false,
    };
    let raft = [
        with_selector(0, &queue_append),
        with_selector(1, &meta_append),
        with_selector(2, &VoteRequest::<QueueRaft>::new(vote, Some(log_id(2, 7)))),
        with_selector(4, &install),
        with_selector(
            6,
            &Ok::<_, RaftError<QueueRaft>>(AppendEntriesResponse::<QueueRaft>::Conflict),
        ),
        with_selector(
            8,
            &Ok::<_, RaftError<QueueRaft>>(VoteResponse::<QueueRaft>::new(
                vote,
                Some(log_id(2, 7)),
                true,
            )),
        ),
        with_selector(
            10,
            &Ok::<_, String>(Some(SnapshotResponse::<QueueRaft>::new(vote))),
        ),
        crate::raft::append_stream::encode_request(
            crate::raft::append_stream::StreamHeader {
                stream: 1 << 60,
                seq: 3,
            },
            &queue_append,
        )
        .ok()
        .map(|payload| [vec![12], payload].concat()),
        with_selector(
            14,
            &Ok::<openraft::raft::StreamAppendResult<QueueRaft>, String>(Ok(Some(log_id(2, 9)))),
        ),
        with_selector(
            14,
            &Err::<openraft::raft::StreamAppendResult<QueueRaft>, String>(
                "append stream 7: request 4 where 3 was due".to_owned(),
            ),
        ),
    ];
    seeds.extend(raft.into_iter().flatten().map(|bytes| ("raft_rpc", bytes)));
    let admin = [
        with_selector(
            0,
            &AdminRequest::MoveLeadership {
                queue: Some("/quorum/orders".to_owned()),
                to: Some(2),
            },
        ),
        with_selector(1, &AdminResponse::Done("moved".to_owned())),
    ];
    seeds.extend(
        admin
            .into_iter()
            .flatten()
            .map(|bytes| ("admin_rpc", bytes)),
    );
    seeds.extend(store_records());
    seeds.extend(store_journals());
    let mut segment = Vec::new();
    crate::paging::record::encode(&mut segment, 5 << 16, b"first body");
    crate::paging::record::encode(&mut segment, (5 << 16) + 1, b"");
    seeds.push(("segment_record", segment));
    seeds
}

/// store_record: first byte (type << 1) | 0, then group id and index LE,
/// then the framed record as the store writes it.
fn store_records() -> Vec<(&'static str, Vec<u8>)> {
    let group_id = 0x1234_5678_9abc_def0u64;
    let mut out = Vec::new();
    let mut push = |kind: u8, key: RecordKey, index: u64, payload: Option<Vec<u8>>| {
        if let Some(payload) = payload {
            let mut seed = vec![kind << 1];
            seed.extend_from_slice(&group_id.to_le_bytes());
            seed.extend_from_slice(&index.to_le_bytes());
            seed.extend_from_slice(&frame(key, &payload));
            out.push(("store_record", seed));
        }
    };
    let meta = |kind| RecordKey::Meta {
        group_id,
        kind: Ok(kind),
    };
    push(
        0,
        meta(MetaKind::Vote),
        0,
        postcard::to_allocvec(&openraft::alias::VoteOf::<QueueRaft>::new(3, 2)).ok(),
    );
    push(
        1,
        meta(MetaKind::Committed),
        0,
        postcard::to_allocvec(&Some(log_id(2, 6))).ok(),
    );
    push(
        2,
        meta(MetaKind::LastPurged),
        0,
        postcard::to_allocvec(&log_id(1, 2)).ok(),
    );
    for entry in queue_entries() {
        let index = entry.log_id.index;
        let key = RecordKey::Entry { group_id, index };
        push(3, key, index, postcard::to_allocvec(&entry).ok());
    }
    let entry = meta_entry();
    let index = entry.log_id.index;
    push(
        4,
        RecordKey::Entry { group_id, index },
        index,
        postcard::to_allocvec(&entry).ok(),
    );
    out
}

/// store_journal: journals of the queue entries' framed records, as the
/// store's journal writer lays them out.
fn store_journals() -> Vec<(&'static str, Vec<u8>)> {
    let group_id = 0x0bad_cafe_u64;
    let records: Vec<(u64, u64, Vec<u8>)> = queue_entries()
        .into_iter()
        .filter_map(|entry| {
            let index = entry.log_id.index;
            let payload = postcard::to_allocvec(&entry).ok()?;
            Some((
                group_id,
                index,
                frame(RecordKey::Entry { group_id, index }, &payload),
            ))
        })
        .collect();
    journal_seeds(&records)
        .into_iter()
        .map(|seed| ("store_journal", seed))
        .collect()
}
