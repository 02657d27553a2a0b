//! The round-trip check every postcard payload decoded off the fabric gets
//! in the fuzz targets and the corpus replay test (Raft RPCs of any group,
//! forwarding and admin messages), and the Raft RPC check generic over a
//! group's type configuration. A failed check panics: that is what
//! libFuzzer reports.
//!
//! It must not know which groups exist (`quorum` and `meta` pass their
//! type configurations in) or how payloads travel.

use openraft::error::RaftError;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::RaftTypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::append_stream::{split_request, StreamAnswer};
use crate::net::NodeId;

/// Feed `bytes` to `decode`; what it accepts must encode into bytes that are
/// no longer than the input (postcard's encoding is the shortest one), that
/// decode again, and that encode again identically (decode of the
/// re-encoding is the same value, compared by its encoding since not every
/// payload type has `PartialEq`). Returns whether `bytes` decoded.
pub(crate) fn postcard_round_trip<T, E>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, E>,
) -> bool
where
    T: Serialize,
    E: std::fmt::Display,
{
    let Ok(value) = decode(bytes) else {
        return false;
    };
    let first = postcard::to_allocvec(&value).expect("a decoded payload encodes");
    assert!(
        first.len() <= bytes.len(),
        "re-encoding is longer ({}) than the input ({})",
        first.len(),
        bytes.len()
    );
    let again = match decode(&first) {
        Ok(again) => again,
        Err(e) => panic!("a re-encoded payload does not decode: {e}"),
    };
    let second = postcard::to_allocvec(&again).expect("a re-decoded payload encodes");
    assert_eq!(first, second, "decode of the re-encoding differs");
    true
}

/// [`postcard_round_trip`] through `postcard::from_bytes`, the decoder of
/// most fabric payloads.
pub(crate) fn postcard_check<T: Serialize + DeserializeOwned>(bytes: &[u8]) -> bool {
    postcard_round_trip(bytes, |b: &[u8]| postcard::from_bytes::<T>(b))
}

/// How many payload types [`raft_rpc`] knows (its `selector` is taken
/// modulo this).
pub(crate) const RAFT_RPC_KINDS: u8 = 8;

/// The Raft RPC payloads of a group of type configuration `C`, as
/// `quorum::rpc` / `meta::rpc` (requests) and
/// `raft::network::GroupConnection::call` and `raft::append_stream`
/// (answers) decode them; `selector` picks the payload type.
pub(crate) fn raft_rpc<C>(selector: u8, payload: &[u8])
where
    C: RaftTypeConfig<NodeId = NodeId>,
{
    match selector % RAFT_RPC_KINDS {
        0 => postcard_check::<AppendEntriesRequest<C>>(payload),
        1 => postcard_check::<VoteRequest<C>>(payload),
        2 => postcard_check::<super::snapshot_stream::SnapshotChunk<C>>(payload),
        3 => postcard_check::<Result<AppendEntriesResponse<C>, RaftError<C>>>(payload),
        4 => postcard_check::<Result<VoteResponse<C>, RaftError<C>>>(payload),
        5 => postcard_check::<Result<Option<SnapshotResponse<C>>, String>>(payload),
        // A pipelined append: the header split off as the follower's
        // transport reader does, then the request as its feed decodes it.
        6 => postcard_round_trip(payload, |bytes: &[u8]| {
            let (header, request) = split_request(&bytes::Bytes::copy_from_slice(bytes))?;
            let request = postcard::from_bytes::<AppendEntriesRequest<C>>(&request)?;
            Ok::<_, postcard::Error>((header, request))
        }),
        _ => postcard_check::<StreamAnswer<C>>(payload),
    };
}
