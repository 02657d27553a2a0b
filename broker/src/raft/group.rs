//! Raft group ids: one group per quorum queue, its id derived from the
//! queue's name so every node agrees without asking; id 0 is reserved for
//! the cluster-metadata group.

/// A Raft group (one per quorum queue), derived from the queue's name.
pub type GroupId = u64;

/// The group id no queue gets: it is the cluster-metadata group's
/// (`crate::meta`), whose RPCs share the transport with the queues'.
pub const RESERVED_GROUP_ID: GroupId = 0;

/// The group id for a queue name: 64-bit FNV-1a, the same on every node,
/// never [`RESERVED_GROUP_ID`] (a name hashing to it gets 1 instead).
pub fn group_id(queue_name: &str) -> GroupId {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in queue_name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    if hash == RESERVED_GROUP_ID {
        1
    } else {
        hash
    }
}
