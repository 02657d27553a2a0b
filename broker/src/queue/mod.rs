//! Queues, behind the one narrow interface ([`Queue`]) the protocol engine
//! uses. A transient queue lives in memory on this node; quorum queues and
//! queues reached through the fabric implement the same trait later, so the
//! engine never changes for them.
//!
//! Architecture invariant: queues know nothing of frames, sessions or link
//! handles. They talk back to a connection only through [`Sink`], with an
//! opaque tag the engine chose.

mod address;
mod consumer_options;
mod consumer_order;
pub mod dead_letter;
mod directory;
pub(crate) mod dispatch;
pub(crate) mod expiry;
pub mod filter;
mod filtered_take;
mod message;
mod pattern;
mod policy;
mod resource_alarm;
pub(crate) mod shed;
mod sink;
mod transient;

pub(crate) use resource_alarm::{spawn_watcher, ResourceAlarm, ResourceLimits};

pub use crate::config::{Overflow, PolicyConfig};
pub use address::{AddressError, QueueAddress, QueueKind, QUEUE_NAME_MAX_BYTES};
pub use consumer_options::ConsumerOptions;
pub use directory::{LookupError, PrepareFuture, QueueDirectory, DYNAMIC_PREFIX};
pub use message::{Delivery, Message, MessageId};
pub use pattern::{AddressPattern, PatternError};
pub use policy::{Policies, PolicyError, PolicySet, QueuePolicy};
pub use sink::{QueueEvent, QueueEventKind, Sink};
pub use transient::TransientQueue;

/// What a consumer decided about a delivery (messaging 3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    /// Processed: remove the message.
    Accepted,
    /// Invalid: remove the message (dead-lettered when the queue's policy
    /// names a dead-letter address).
    Rejected,
    /// Not processed: make it available again, delivery-count unchanged.
    Released,
    /// Not processed, possibly with a failed attempt.
    Modified {
        /// Count a failed delivery attempt (delivery-count + 1).
        delivery_failed: bool,
        /// Never deliver it to this consumer again.
        undeliverable_here: bool,
    },
}

/// What became of a publish when [`Queue::publish`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStatus {
    /// The queue has taken the message (for a transient queue: it is in
    /// memory; for a quorum queue: committed on a majority and on disk).
    Accepted,
    /// The outcome will arrive later as [`QueueEventKind::Published`] on the
    /// confirm sink (e.g. a quorum queue waiting for its Raft commit).
    Pending,
}

/// Identifies one consumer of one queue; unique within that queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerId(pub u64);

/// A request to be told the outcome of a publish.
#[derive(Debug, Clone)]
pub struct PublishConfirm {
    /// Where to report it.
    pub sink: Sink,
    /// The publishing link's tag, for the event.
    pub tag: u64,
    /// Opaque to the queue; handed back in the event (the delivery-id).
    pub token: u64,
}

impl PublishConfirm {
    /// Tell the publisher what became of its publish.
    pub fn report(self, outcome: Outcome) {
        self.sink.send(
            self.tag,
            QueueEventKind::Published {
                token: self.token,
                outcome,
            },
        );
    }
}

/// Depth and identity of one queue, for management and metrics. The
/// totals count since the queue was opened on this node (a quorum queue's
/// published total counts the enqueues this replica applied; its delivered
/// and acknowledged totals what this node's dispatcher did while leading).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue's address, e.g. `/queues/orders`.
    pub address: String,
    /// Messages waiting to be delivered.
    pub ready: usize,
    /// Messages delivered and not yet settled.
    pub unsettled: usize,
    /// Consumers attached.
    pub consumers: usize,
    /// Bytes of the messages held (waiting and unsettled).
    pub bytes: u64,
    /// Of `bytes`, those kept in segment files rather than in memory
    /// (always 0 for a transient queue).
    pub paged_bytes: u64,
    /// Messages taken into the queue.
    pub published_total: u64,
    /// Deliveries handed to consumers (redeliveries count again).
    pub delivered_total: u64,
    /// Deliveries settled accepted or rejected (removed from the queue).
    pub acknowledged_total: u64,
}

/// One transaction's work on one queue, applied at once by
/// [`Queue::commit`]: nothing of it is visible before, all of it after.
#[derive(Debug, Default)]
pub struct TxnPart {
    /// Messages to enqueue, in the order they were posted.
    pub messages: Vec<Message>,
    /// Deliveries to settle: the consumer that has the message out, the
    /// message and the outcome the transaction gave it.
    pub settles: Vec<(ConsumerId, MessageId, Outcome)>,
}

impl TxnPart {
    /// Bytes of the messages to enqueue.
    pub fn bytes(&self) -> u64 {
        self.messages.iter().map(|m| m.len() as u64).sum()
    }
}

/// Errors a queue reports to the engine, each mapped to an AMQP condition.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    /// The queue was deleted or its node is shutting down.
    #[error("queue {0} is gone")]
    Gone(String),
    /// The queue refuses this consumer (too many consumers, ...).
    #[error("{0}")]
    Refused(String),
    /// This node does not lead the queue's Raft group.
    #[error("this node does not lead {queue}{}", .leader.map(|l| format!("; node {l} does")).unwrap_or_default())]
    NotLeader {
        /// The queue.
        queue: String,
        /// The leader's node id, when known.
        leader: Option<u64>,
    },
}

/// The interface between the protocol engine and every kind of queue.
///
/// All methods are synchronous and never block: they take a short lock at
/// most and report later events through [`Sink`]s. Deliveries are pushed to
/// a consumer's sink only within the credit the engine granted via
/// [`Queue::flow`], so a sink never holds more than that credit.
pub trait Queue: Send + Sync + 'static {
    /// The queue's address.
    fn address(&self) -> &QueueAddress;

    /// Whether links to this queue can be served on this node now (a
    /// quorum queue is served by its Raft leader).
    fn serves_here(&self) -> Result<(), QueueError> {
        Ok(())
    }

    /// Offer a message. With `confirm`, a `Pending` outcome is later
    /// reported on that sink; without it the publisher settled already.
    fn publish(
        &self,
        message: Message,
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError>;

    /// Whether the queue can take more messages now. When it cannot, `sink`
    /// gets [`QueueEventKind::Capacity`] with `tag` once it can.
    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool;

    /// Add a consumer; deliveries and drain completions for it go to `sink`
    /// with `tag`. `options` (filter, priority) reach the dispatcher of
    /// the node that serves the queue.
    fn subscribe(
        &self,
        sink: Sink,
        tag: u64,
        options: ConsumerOptions,
    ) -> Result<ConsumerId, QueueError>;

    /// Set how far the consumer may be sent: deliveries are pushed while
    /// the consumer's delivery-count is below `credit_limit` (serial
    /// arithmetic, the link's delivery-count + link-credit). With `drain`,
    /// the queue pushes what it has, then reports
    /// [`QueueEventKind::Drained`] and treats the remaining credit as used.
    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool);

    /// Settle one delivered message.
    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome);

    /// Remove a consumer; its unsettled messages become available again,
    /// in their original order, delivery-count unchanged.
    fn unsubscribe(&self, consumer: ConsumerId);

    /// Depth and consumers.
    fn stats(&self) -> QueueStats;

    /// Whether `messages` more messages of `bytes` in all fit now. A
    /// transaction asks every queue it touches before it commits on any,
    /// so a full queue refuses the whole transaction before anything
    /// lands.
    fn has_room_for(&self, _messages: usize, _bytes: u64) -> bool {
        true
    }

    /// Apply one transaction's part on this queue at once: enqueue its
    /// messages and settle its deliveries, all or nothing. `Accepted` when
    /// done; `Pending` when the outcome is reported on `confirm` later (a
    /// quorum queue: one Raft log entry, `Accepted` once committed,
    /// `Released` when it could not be).
    fn commit(&self, part: TxnPart, confirm: PublishConfirm) -> Result<PublishStatus, QueueError> {
        let _ = (part, confirm);
        Err(QueueError::Refused(format!(
            "transactions are not supported on {}",
            self.address()
        )))
    }
}

#[cfg(test)]
mod tests;
