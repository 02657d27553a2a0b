//! The checks the fuzz targets (and the corpus replay test) run on the
//! metadata group's decoders of outside bytes: its snapshot file (read from
//! disk or installed from the leader), its forwarded proposals and their
//! answers, and its Raft RPCs. They live here because those types are
//! private to `meta`; `crate::fuzz_checks` is their public face. A failed
//! check panics: that is what libFuzzer reports.
//!
//! It must not know how snapshots are stored or how payloads travel.

use super::state::ClusterState;
use super::state_machine::{seal, unseal, FileBody, MAGIC};
use super::types::{MetaRaft, MetaReply, MetaRequest};
use crate::raft::fuzz_checks::{postcard_check, raft_rpc as generic_raft_rpc};

/// The snapshot's magic and CRC32C would turn nearly every random input
/// away, so bit 0 of the first byte asks for the rest to be wrapped in a
/// right magic and CRC; bit 1 picks what the body is decoded as: the file
/// on disk (`FileBody`) or the state a leader ships (`ClusterState`).
pub(crate) fn snapshot(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = if mode & 1 == 1 {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(rest);
        let crc = crc32c::crc32c(&file);
        file.extend_from_slice(&crc.to_le_bytes());
        file
    } else {
        rest.to_vec()
    };
    if mode & 2 == 0 {
        sealed_round_trip::<FileBody>(&file);
    } else {
        sealed_round_trip::<ClusterState>(&file);
    }
}

/// An accepted snapshot has the magic and a right CRC, and sealing what it
/// decoded to gives a snapshot that unseals and seals again identically,
/// and is no longer than the input.
fn sealed_round_trip<T>(file: &[u8])
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let Ok(value) = unseal::<T>(file) else {
        return;
    };
    assert!(file.starts_with(MAGIC), "accepted without the magic");
    let (body, crc) = file.split_at(file.len() - 4);
    assert_eq!(
        crc32c::crc32c(body).to_le_bytes(),
        crc,
        "accepted a wrong CRC"
    );
    let first = seal(&value).expect("a read snapshot seals");
    assert!(first.len() <= file.len(), "re-sealed snapshot is longer");
    let again = unseal::<T>(&first).expect("a re-sealed snapshot unseals");
    let second = seal(&again).expect("a re-read snapshot seals");
    assert_eq!(first, second, "unseal of the re-sealed snapshot differs");
}

/// How many payload types [`raft_rpc`] knows.
pub(crate) const RAFT_RPC_KINDS: u8 = crate::raft::fuzz_checks::RAFT_RPC_KINDS + 2;

/// The metadata group's fabric payloads: its Raft RPCs and answers
/// (`selector` below [`crate::raft::fuzz_checks::RAFT_RPC_KINDS`]), a
/// forwarded proposal (`MetaRequest`) and its answer (`MetaReply`).
pub(crate) fn raft_rpc(selector: u8, payload: &[u8]) {
    let selector = selector % RAFT_RPC_KINDS;
    match selector.checked_sub(crate::raft::fuzz_checks::RAFT_RPC_KINDS) {
        None => generic_raft_rpc::<MetaRaft>(selector, payload),
        Some(0) => {
            postcard_check::<MetaRequest>(payload);
        }
        Some(_) => {
            postcard_check::<MetaReply>(payload);
        }
    }
}

/// Valid inputs for the `meta_snapshot` target and the metadata group's
/// part of `raft_rpc` (its first byte: odd), from the real encoders.
pub(crate) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use super::state::{MetaCommand, NodeInfo};
    let mut state = ClusterState::default();
    let info = NodeInfo {
        fabric: "10.0.0.2:7000".to_owned(),
        amqp: Some("10.0.0.2:5672".to_owned()),
    };
    state.apply(MetaCommand::AddNode {
        id: 2,
        info: info.clone(),
    });
    state.apply(MetaCommand::DeclareQueue {
        name: "orders".to_owned(),
        replication_factor: 3,
    });
    let mut seeds = Vec::new();
    // Mode 2: the rest is a whole sealed `ClusterState`.
    if let Ok(sealed) = seal(&state) {
        seeds.push(("meta_snapshot", [&[2u8][..], &sealed].concat()));
    }
    let meta_selector = |n: u8| (n << 1) | 1;
    let write = MetaRequest::Write(MetaCommand::AddNode { id: 3, info });
    let requests = [
        write,
        MetaRequest::AddVoter { id: 3 },
        MetaRequest::Campaign { from: 1 },
    ];
    for request in requests {
        if let Ok(bytes) = postcard::to_allocvec(&request) {
            let selector = meta_selector(crate::raft::fuzz_checks::RAFT_RPC_KINDS);
            seeds.push(("raft_rpc", [&[selector][..], &bytes].concat()));
        }
    }
    if let Ok(bytes) = postcard::to_allocvec(&MetaReply::NotLeader(Some(2))) {
        let selector = meta_selector(crate::raft::fuzz_checks::RAFT_RPC_KINDS + 1);
        seeds.push(("raft_rpc", [&[selector][..], &bytes].concat()));
    }
    seeds
}
