//! Link endpoints of a session: a *publisher link* (the peer sends, we
//! receive into a queue) and a *consumer link* (a queue's deliveries go out
//! to the peer), with their credit and delivery-count bookkeeping.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::relay::Relay;
use crate::codec::{ReceiverSettleMode, SenderSettleMode};
use crate::queue::{ConsumerId, Delivery, Queue, Sink};

/// Where a publisher link's messages go.
pub(crate) enum Destination {
    /// The queue its target names.
    Queue(Arc<dyn Queue>),
    /// Each message to the queue its `to` names (a null target address).
    Relay(Relay),
    /// The transaction coordinator: each message is a declare or a
    /// discharge (`transaction.rs`).
    Coordinator,
}

/// A link on which the peer publishes to a queue.
pub(crate) struct PublisherLink {
    pub(crate) destination: Destination,
    /// Our tag for this link in queue events (capacity, publish outcomes).
    pub(crate) tag: u64,
    pub(crate) rcv_settle_mode: ReceiverSettleMode,
    /// The peer's delivery-count as we track it.
    pub(crate) delivery_count: u32,
    /// Credit the peer still has.
    pub(crate) credit: u32,
    /// Credit we grant when the queue has room.
    pub(crate) credit_window: u32,
    /// Waiting for the queue to report room before granting more credit.
    pub(crate) waiting_capacity: bool,
    pub(crate) max_message_size: u64,
    /// A multi-frame delivery in progress.
    pub(crate) partial: Option<PartialDelivery>,
}

impl PublisherLink {
    /// Whether the link may be given credit now; if not, `sink` gets a
    /// `Capacity` event for `tag` once it may.
    pub(crate) fn has_capacity(&mut self, sink: &Sink) -> bool {
        match &mut self.destination {
            Destination::Queue(queue) => queue.has_capacity(sink, self.tag),
            Destination::Relay(relay) => relay.has_capacity(sink, self.tag),
            Destination::Coordinator => true,
        }
    }
}

/// The frames of one incoming delivery received so far.
pub(crate) struct PartialDelivery {
    pub(crate) delivery_id: u32,
    pub(crate) settled: bool,
    /// The first non-empty frame payload: nearly every message is one
    /// frame, and holding it here (not in a Vec) costs no allocation.
    pub(crate) first: Bytes,
    /// The payloads of later frames (multi-frame messages only).
    pub(crate) rest: Vec<Bytes>,
    pub(crate) len: usize,
    /// The transaction the delivery is posted in (its transfer's
    /// transactional-state), if any.
    pub(crate) txn_id: Option<Bytes>,
}

impl PartialDelivery {
    /// A delivery with no payload received yet.
    pub(crate) fn new(delivery_id: u32) -> PartialDelivery {
        PartialDelivery {
            delivery_id,
            settled: false,
            first: Bytes::new(),
            rest: Vec::new(),
            len: 0,
            txn_id: None,
        }
    }

    /// Add one frame's (non-empty) payload.
    pub(crate) fn push(&mut self, payload: Bytes) {
        if self.first.is_empty() {
            self.first = payload;
        } else {
            self.rest.push(payload);
        }
    }

    /// The whole message: the single chunk as is, or the chunks joined
    /// (one copy, only for multi-frame messages).
    pub(crate) fn into_bytes(self) -> Bytes {
        if self.rest.is_empty() {
            return self.first;
        }
        let mut joined = BytesMut::with_capacity(self.len);
        joined.extend_from_slice(&self.first);
        for chunk in &self.rest {
            joined.extend_from_slice(chunk);
        }
        joined.freeze()
    }
}

/// A link on which a queue delivers to the peer.
pub(crate) struct ConsumerLink {
    pub(crate) queue: Arc<dyn Queue>,
    pub(crate) consumer: ConsumerId,
    pub(crate) tag: u64,
    pub(crate) snd_settle_mode: SenderSettleMode,
    /// Deliveries sent (our delivery-count).
    pub(crate) delivery_count: u32,
    /// delivery-count + link-credit as last granted by the peer.
    pub(crate) credit_limit: u32,
    pub(crate) drain: bool,
    /// Deliveries the queue pushed that the link had no credit for when
    /// they arrived (the peer lowered its credit meanwhile), oldest first.
    /// They go out before anything else once credit comes back, so the
    /// link's order is the queue's; the queue counts them as out with this
    /// consumer, so at most the peer's earlier credit is ever held here,
    /// and they return to the queue if the link goes away.
    pub(crate) held: VecDeque<Delivery>,
    /// The queue is this link's dynamic node: deleted when the link goes.
    pub(crate) dynamic: bool,
}

impl ConsumerLink {
    /// Credit left, by serial arithmetic (0 if the limit is behind).
    pub(crate) fn credit(&self) -> u32 {
        let credit = self.credit_limit.wrapping_sub(self.delivery_count);
        if (credit as i32) < 0 {
            0
        } else {
            credit
        }
    }
}

/// Either kind of link.
pub(crate) enum Link {
    Publisher(PublisherLink),
    Consumer(ConsumerLink),
}

impl Link {
    pub(crate) fn tag(&self) -> u64 {
        match self {
            Link::Publisher(l) => l.tag,
            Link::Consumer(l) => l.tag,
        }
    }
}
