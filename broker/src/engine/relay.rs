//! Anonymous relay (the ANONYMOUS-RELAY capability): a publisher link
//! attached with a null target address, whose every message names its
//! queue in the properties' `to`. Each address is resolved exactly as an
//! attach resolves it ([`State::queue_for`]: auto-create, and whatever an
//! attach checks), once per link and address, and kept in a small bounded
//! cache; a message to an address that cannot exist is rejected with
//! amqp:not-found, that delivery only.
//!
//! A cache miss may need the queue prepared first (a quorum queue created
//! or its leader found), which is asynchronous: the message waits in
//! [`State::relay_wait`] and the connection task prepares the address
//! before it reads the next frame, so the link's order is kept. Quorum
//! queues led by another node need nothing here: the directory hands out
//! the same forwarding queue an attach gets.
//!
//! It knows nothing of how a queue stores or forwards messages.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::link::{Destination, Link};
use super::outbox::Outbox;
use super::state::State;
use crate::codec::definitions::condition;
use crate::codec::{DeliveryState, Error};
use crate::queue::{Message, Queue, QueueAddress, QueueError, Sink};

/// Addresses whose queue one relay link keeps resolved. A publisher that
/// cycles through more addresses resolves the oldest again (cheap for a
/// known queue); the cache never grows past this.
pub(crate) const RELAY_CACHE_MAX: usize = 32;

/// The relay side of a publisher link.
#[derive(Default)]
pub(crate) struct Relay {
    /// Resolved queues, most recently used last.
    cache: VecDeque<(QueueAddress, Arc<dyn Queue>)>,
    /// The queue that reported it was full after our last publish to it;
    /// the link gets no new credit until that queue has room again (the
    /// same back-pressure a publisher attached to that queue gets).
    pub(crate) blocked_on: Option<Arc<dyn Queue>>,
}

impl Relay {
    pub(crate) fn get(&mut self, address: &QueueAddress) -> Option<Arc<dyn Queue>> {
        let at = self.cache.iter().position(|(a, _)| a == address)?;
        let entry = self.cache.remove(at)?;
        let queue = entry.1.clone();
        self.cache.push_back(entry);
        Some(queue)
    }

    pub(crate) fn insert(&mut self, address: QueueAddress, queue: Arc<dyn Queue>) {
        self.cache.retain(|(a, _)| *a != address);
        if self.cache.len() >= RELAY_CACHE_MAX {
            self.cache.pop_front();
        }
        self.cache.push_back((address, queue));
    }

    fn forget(&mut self, address: &QueueAddress) {
        self.cache.retain(|(a, _)| a != address);
    }

    /// Whether the link may be given credit now.
    pub(crate) fn has_capacity(&mut self, sink: &Sink, tag: u64) -> bool {
        match &self.blocked_on {
            Some(queue) if !queue.has_capacity(sink, tag) => false,
            _ => {
                self.blocked_on = None;
                true
            }
        }
    }
}

/// A relayed message waiting for its address to be prepared.
pub(crate) struct RelayWait {
    pub(crate) channel: u16,
    pub(crate) handle: u32,
    pub(crate) address: QueueAddress,
    pub(crate) message: Message,
    pub(crate) delivery_id: u32,
    pub(crate) settled: bool,
    /// Posted in this transaction: staged, not published, once resolved.
    pub(crate) txn_id: Option<Bytes>,
}

/// What became of a relayed message right away.
pub(crate) enum Relayed {
    /// Taken (accepted now, or its outcome comes later as a queue event);
    /// `true` if it is accepted now.
    Published(bool),
    /// Refused: this delivery only gets this error.
    Refused(Error),
    /// The address must be prepared first (see [`State::relay_wait`]);
    /// the message comes back to wait.
    Prepare(QueueAddress, Message),
}

/// The queue address a relayed message names in its `to`.
pub(crate) fn destination(bytes: &Bytes) -> Result<QueueAddress, Error> {
    let properties = crate::codec::sections::properties(bytes).map_err(|e| {
        Error::new(
            condition::DECODE_ERROR,
            format!("malformed properties: {e}"),
        )
    })?;
    let Some(to) = properties.as_ref().and_then(|p| p.to()) else {
        return Err(Error::new(
            condition::NOT_FOUND,
            "a message on an anonymous link needs a `to` address",
        ));
    };
    QueueAddress::parse(to).map_err(|e| Error::new(condition::NOT_FOUND, e.to_string()))
}

/// Publish `message` to the queue its `to` names, if the link knows it.
pub(crate) fn relay(
    relay: &mut Relay,
    tag: u64,
    message: Message,
    confirm: Option<crate::queue::PublishConfirm>,
    sink: &Sink,
) -> Relayed {
    let address = match destination(&message.bytes) {
        Ok(address) => address,
        Err(error) => return Relayed::Refused(error),
    };
    match relay.get(&address) {
        Some(queue) => publish(relay, &address, queue, tag, message, confirm, sink),
        None => Relayed::Prepare(address, message),
    }
}

/// Publish to a resolved queue; a queue that is full afterwards holds the
/// link's credit back.
fn publish(
    relay: &mut Relay,
    address: &QueueAddress,
    queue: Arc<dyn Queue>,
    tag: u64,
    message: Message,
    confirm: Option<crate::queue::PublishConfirm>,
    sink: &Sink,
) -> Relayed {
    match queue.publish(message, confirm) {
        Ok(status) => {
            if !queue.has_capacity(sink, tag) {
                relay.blocked_on = Some(queue);
            }
            Relayed::Published(status == crate::queue::PublishStatus::Accepted)
        }
        // No leader in time: the queue has reported `released` through the
        // confirm already, so the publisher may send again.
        Err(QueueError::NotLeader { .. }) => Relayed::Published(false),
        Err(error) => {
            // Deleted, or refusing: resolve it afresh next time.
            relay.forget(address);
            Relayed::Refused(super::attach::queue_error(&error))
        }
    }
}

impl State {
    /// Finish the relayed message that waited for its address: the
    /// connection task prepared it (or failed to); resolve and publish it.
    pub(crate) fn resume_relay(&mut self, out: &mut Outbox) {
        let Some(wait) = self.relay_wait.take() else {
            return;
        };
        let resolved = self
            .authorize_relay(&wait.address)
            .and_then(|()| self.queue_for(&wait.address.to_string()));
        if let Some(txn_id) = wait.txn_id.clone() {
            return self.resume_transactional_relay(wait, txn_id, resolved, out);
        }
        let sink = self.sink.clone();
        let Some(session) = self.sessions.get_mut(&wait.channel) else {
            return;
        };
        let session_flow = session.flow();
        let Some(Link::Publisher(link)) = session.links.get_mut(&wait.handle) else {
            return;
        };
        let mode = link.rcv_settle_mode;
        let tag = link.tag;
        let Destination::Relay(relay) = &mut link.destination else {
            return;
        };
        let confirm = (!wait.settled).then(|| crate::queue::PublishConfirm {
            sink: sink.clone(),
            tag,
            token: u64::from(wait.delivery_id),
        });
        let relayed = match resolved {
            Ok(queue) => {
                relay.insert(wait.address.clone(), queue.clone());
                publish(
                    relay,
                    &wait.address,
                    queue,
                    tag,
                    wait.message,
                    confirm,
                    &sink,
                )
            }
            Err(error) => Relayed::Refused(error),
        };
        let answer = super::transfer::relay_answer(relayed, wait.delivery_id, wait.settled);
        super::transfer::top_up_credit(link, wait.handle, session_flow, &sink, out, wait.channel);
        // A relay link is never detached for one message's fate.
        let _ = super::transfer::answer_publisher(session, wait.channel, mode, answer, out);
    }
}

/// The rejected state for a refused relayed delivery.
pub(crate) fn rejected(error: Error) -> DeliveryState {
    DeliveryState::Rejected { error: Some(error) }
}
