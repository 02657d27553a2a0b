//! The channel from queues back to a connection task: deliveries, drain
//! completions, publish outcomes and capacity wake-ups, each tagged with an
//! opaque number the engine chose.
//!
//! The channel is unbounded in type but bounded in use: a queue pushes
//! deliveries only within the credit the connection granted (capped by
//! `limits.consumer_credit_max` per link), publish outcomes only for
//! publishes the connection made within its own credit, and at most one
//! capacity wake-up per waiting link.

use tokio::sync::mpsc;

use super::message::Delivery;
use super::Outcome;

/// What a queue tells a connection.
#[derive(Debug)]
pub enum QueueEventKind {
    /// A message for the consumer with this tag.
    Deliver(Delivery),
    /// The consumer's drain request is complete: what was available has
    /// been pushed before this event, the rest of the credit is used up.
    Drained {
        /// The credit limit the drain used up; the link's delivery-count
        /// becomes this.
        credit_limit: u32,
    },
    /// The outcome of a publish that returned `Pending`.
    Published {
        /// The token given with the publish.
        token: u64,
        /// Accepted or rejected.
        outcome: Outcome,
    },
    /// The queue has room again for the publisher with this tag.
    Capacity,
    /// The consumer's registration stamp, for its node to keep (see
    /// `ConsumerOptions::registered`); sent by a quorum queue with a single
    /// active consumer to a forwarded consumer. The engine ignores it.
    Registered {
        /// The stamp.
        stamp: u64,
    },
    /// The queue can no longer serve this link here (e.g. its Raft leader
    /// moved): the engine detaches the link with this error.
    Closed {
        /// AMQP error condition.
        condition: &'static str,
        /// Why.
        description: String,
    },
}

/// One event with the engine's tag.
#[derive(Debug)]
pub struct QueueEvent {
    /// The tag given when subscribing or asking for capacity.
    pub tag: u64,
    /// What happened.
    pub kind: QueueEventKind,
}

/// The sending side, cloned into every queue a connection uses.
#[derive(Debug, Clone)]
pub struct Sink {
    tx: mpsc::UnboundedSender<QueueEvent>,
}

impl Sink {
    /// A new sink and the receiver the connection task polls.
    pub fn channel() -> (Sink, mpsc::UnboundedReceiver<QueueEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Sink { tx }, rx)
    }

    /// Send an event; false if the connection is gone.
    pub fn send(&self, tag: u64, kind: QueueEventKind) -> bool {
        self.tx.send(QueueEvent { tag, kind }).is_ok()
    }

    /// Whether two sinks lead to the same connection.
    pub fn same_connection(&self, other: &Sink) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Whether the connection behind the sink is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
