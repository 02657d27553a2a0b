//! The openraft type configuration of a quorum queue's Raft group and the
//! commands its log carries.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::net::NodeId;
use crate::queue::dead_letter::DeathReason;

/// What a settlement does to the replicated copy of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettleKind {
    /// accepted or rejected: the message is gone.
    Remove,
    /// modified with delivery-failed: one more failed delivery attempt.
    Failed,
}

/// An entry of a quorum queue's Raft log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Published messages, each the whole encoded message as received.
    /// The i-th gets message id `message_id(entry index, i)`. Many
    /// publishes share one entry, so they share one fsync and one trip
    /// through openraft's core.
    Enqueue {
        /// The encoded messages, in publish order.
        messages: Vec<Bytes>,
    },
    /// Consumers settled these messages.
    Settle {
        /// Message ids (log indexes of their enqueue entries).
        ids: Vec<u64>,
        /// What happened to them.
        kind: SettleKind,
    },
    /// An operator purged the queue: every message with an id up to
    /// `upto` is removed, except those the leader had out with consumers
    /// when it proposed this (they stay theirs to settle). Every replica
    /// removes the same messages.
    Purge {
        /// The highest message id the leader had applied.
        upto: u64,
        /// Ids out with consumers then, kept.
        except: Vec<u64>,
    },
    /// One local transaction's part on this queue: its messages enqueued
    /// (the i-th gets `message_id(entry index, i)`, as in `Enqueue`) and
    /// its settlements applied in one entry, so that no replica, and so no
    /// later leader, ever holds half of it. (Variants are only ever added
    /// at the end, so that logs written before still read.)
    Transact {
        /// The encoded messages, in the order they were posted.
        messages: Vec<Bytes>,
        /// Settled message ids and what happened to each.
        settles: Vec<(u64, SettleKind)>,
    },
    /// Published messages of which at least one expires (a header ttl or
    /// the leader's policy's `message_ttl_ms`): as `Enqueue`, plus each
    /// message's expiry, ms since the epoch (0: never), stamped by the
    /// leader so every replica holds the same time (`queue/expiry.rs`).
    EnqueueExpiring {
        /// The encoded messages, in publish order.
        messages: Vec<Bytes>,
        /// The i-th message's expiry.
        expires_at: Vec<u64>,
    },
    /// The leader removed these messages without a consumer's settlement:
    /// expired, or dropped from the head for its policy's length limit
    /// (`discard.rs`). Every replica removes the same ones. (The reason,
    /// `codec::dead_letter::DeathReason`, keeps its variants' order on
    /// disk too: the test below guards it.)
    Discard {
        /// Message ids.
        ids: Vec<u64>,
        /// Why.
        reason: DeathReason,
    },
    /// A local transaction's part of which at least one message expires:
    /// as `Transact`, plus each message's expiry stamped by the leader (as
    /// in `EnqueueExpiring`).
    TransactExpiring {
        /// The encoded messages, in the order they were posted.
        messages: Vec<Bytes>,
        /// Settled message ids and what happened to each.
        settles: Vec<(u64, SettleKind)>,
        /// The i-th message's expiry, ms since the epoch (0: never).
        expires_at: Vec<u64>,
    },
    /// The leader dead-lettered these messages (a rejection, the delivery
    /// limit, expiry, drop-head): each moves to the outbox (`dead_letters.rs`), is never
    /// delivered again, and is sent to the dead-letter address with the
    /// key `(salt, id)` until `DeadLettered` removes it.
    DeadLetter {
        /// Message ids and why each was dead-lettered.
        ids: Vec<(u64, DeathReason)>,
        /// Random, chosen by the leader: makes the keys unique and
        /// unguessable.
        salt: u64,
    },
    /// The dead-letter queue committed the copies of these outbox
    /// messages: they leave the queue.
    DeadLettered {
        /// Message ids.
        ids: Vec<u64>,
    },
}

/// The state machine's answer to a command (the message id of an enqueue
/// is the entry's log index, returned by openraft itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied;

/// A replica's entry in a queue group's membership. Peers are reached by
/// node id (the fabric's peers, the metadata group's members), never by
/// this address, so it is left empty: `BasicNode::default()` says
/// "localhost", a heap string in every copy of the membership a group
/// keeps (openraft's engine and metrics, the state machine, membership
/// entries), and the transport's `learn_peer` skips an empty address.
/// Groups made before keep their "localhost": nothing reads it.
pub(crate) fn member() -> openraft::BasicNode {
    openraft::BasicNode {
        addr: String::new(),
    }
}

openraft::declare_raft_types!(
    /// The openraft types of a quorum queue (the snapshot data,
    /// `SnapshotData`, is the state machine's in openraft 0.10).
    pub QueueRaft:
        D = Command,
        R = Applied,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        AsyncRuntime = crate::raft::LeanRuntime,
);

/// openraft 0.10 logs an entry's data with `Display`: the kind and size,
/// never the bodies.
impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Enqueue { messages } => write!(f, "enqueue({})", messages.len()),
            Command::Settle { ids, kind } => write!(f, "settle({}, {kind:?})", ids.len()),
            Command::Purge { upto, except } => write!(f, "purge(<={upto}, -{})", except.len()),
            Command::Transact { messages, settles } => {
                write!(f, "transact({}, {})", messages.len(), settles.len())
            }
            Command::EnqueueExpiring { messages, .. } => {
                write!(f, "enqueue-expiring({})", messages.len())
            }
            Command::Discard { ids, reason } => write!(f, "discard({}, {reason:?})", ids.len()),
            Command::TransactExpiring {
                messages, settles, ..
            } => write!(
                f,
                "transact-expiring({}, {})",
                messages.len(),
                settles.len()
            ),
            Command::DeadLetter { ids, .. } => write!(f, "dead-letter({})", ids.len()),
            Command::DeadLettered { ids } => write!(f, "dead-lettered({})", ids.len()),
        }
    }
}

/// Most messages in one enqueue entry (ids keep 16 bits for the position).
pub(crate) const ENQUEUE_BATCH_MAX: usize = 4096;

/// The message id of the `position`-th message of the enqueue entry at
/// log `index`: increasing in publish order across entries.
pub(crate) fn message_id(index: u64, position: usize) -> u64 {
    debug_assert!(position < 1 << 16);
    (index << 16) | position as u64
}

/// The Raft handle of one quorum queue.
pub(crate) type QueueRaftHandle =
    openraft::Raft<QueueRaft, super::state_machine::QueueStateMachine>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The log keeps every record ever written: a variant's index on disk
    /// must never change (postcard writes it as the first byte).
    #[test]
    fn command_variants_keep_their_index_on_disk() {
        let first_byte = |c: &Command| postcard::to_stdvec(c).expect("encodes")[0];
        assert_eq!(first_byte(&Command::Enqueue { messages: vec![] }), 0);
        let settle = Command::Settle {
            ids: vec![],
            kind: SettleKind::Remove,
        };
        assert_eq!(first_byte(&settle), 1);
        let purge = Command::Purge {
            upto: 0,
            except: vec![],
        };
        assert_eq!(first_byte(&purge), 2);
        let transact = Command::Transact {
            messages: vec![],
            settles: vec![],
        };
        assert_eq!(first_byte(&transact), 3);
        let expiring = Command::EnqueueExpiring {
            messages: vec![],
            expires_at: vec![],
        };
        assert_eq!(first_byte(&expiring), 4);
        let discard = Command::Discard {
            ids: vec![],
            reason: DeathReason::Expired,
        };
        assert_eq!(first_byte(&discard), 5);
        let transact_expiring = Command::TransactExpiring {
            messages: vec![],
            settles: vec![],
            expires_at: vec![],
        };
        assert_eq!(first_byte(&transact_expiring), 6);
        // The reason is the byte after the (empty) id list.
        let reason_byte = |reason| {
            postcard::to_stdvec(&Command::Discard {
                ids: vec![],
                reason,
            })
            .expect("encodes")[2]
        };
        assert_eq!(reason_byte(DeathReason::Rejected), 0);
        assert_eq!(reason_byte(DeathReason::Expired), 1);
        assert_eq!(reason_byte(DeathReason::Maxlen), 2);
        assert_eq!(reason_byte(DeathReason::DeliveryLimit), 3);
        let dead_letter = Command::DeadLetter {
            ids: vec![],
            salt: 0,
        };
        assert_eq!(first_byte(&dead_letter), 7);
        assert_eq!(first_byte(&Command::DeadLettered { ids: vec![] }), 8);
    }
}
