//! The consumer side of a queue, shared by every queue kind: messages
//! waiting in FIFO order, competing consumers served round-robin within
//! their credit (highest priority first, or one single active consumer:
//! `consumer_order.rs`), drain, messages out with a consumer until settled, and
//! their return (in order) when released, modified or abandoned.
//!
//! A `Dispatcher` is plain data with no lock and no IO; its owner (a
//! transient queue, or the leader of a quorum queue) serializes access.
//! Deliveries go to a consumer's [`Sink`] only within its credit.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

// Keyed by ids this broker assigns (message and consumer ids), looked up
// for every delivery and settlement: a fast hasher, no flooding resistance
// needed.
use foldhash::HashMap;

use super::shed::{shed_deque, shed_map};

#[path = "delivery_limit.rs"]
mod delivery_limit;

use super::consumer_order::ConsumerOrder;
use super::filtered_take::take_matching;
use super::message::{Delivery, Message, MessageId};
use super::policy::QueuePolicy;
use super::sink::{QueueEventKind, Sink};
use super::{ConsumerId, ConsumerOptions, Outcome};

/// A message waiting in the queue or out with a consumer.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: MessageId,
    pub(crate) message: Message,
    pub(crate) delivery_count: u32,
    pub(crate) redelivered: bool,
    /// Consumers that answered `modified` with undeliverable-here; empty
    /// (no allocation) for nearly every message.
    pub(crate) excluded: Vec<ConsumerId>,
    /// When it expires, ms since the epoch; 0: never (`expiry.rs`).
    pub(crate) expires_at: u64,
}

impl Entry {
    pub(crate) fn new(id: MessageId, message: Message) -> Entry {
        let delivery_count = message.published_delivery_count();
        Entry {
            id,
            message,
            delivery_count,
            redelivered: false,
            excluded: Vec::new(),
            expires_at: 0,
        }
    }
}

#[derive(Debug)]
struct Consumer {
    sink: Sink,
    tag: u64,
    /// Deliveries pushed so far, in the link's delivery-count space.
    delivery_count: u32,
    /// Push while `delivery_count` is before this (serial arithmetic).
    credit_limit: u32,
    /// Whether the consumer sits in `Dispatcher::waiting`.
    waiting: bool,
    options: ConsumerOptions,
    /// With a filter: the last waiting message it tested
    /// (`filtered_take.rs`).
    scanned: Option<MessageId>,
}

impl Consumer {
    fn credit(&self) -> u32 {
        let credit = self.credit_limit.wrapping_sub(self.delivery_count);
        // A limit behind the delivery-count (a stale flow) means no credit.
        if (credit as i32) < 0 {
            0
        } else {
            credit
        }
    }
}

/// A consumer removed by [`Dispatcher::clear`].
#[derive(Debug)]
pub(crate) struct ClearedConsumer {
    pub(crate) id: ConsumerId,
    pub(crate) sink: Sink,
    pub(crate) tag: u64,
    pub(crate) delivery_count: u32,
    pub(crate) credit_limit: u32,
}

/// What a settlement did to the message.
#[derive(Debug)]
pub(crate) enum Settled {
    /// Accepted or rejected: the message is gone; here it is.
    Removed(Entry),
    /// Released or modified: it is waiting again.
    Returned,
    /// Not out with that consumer (already settled, or never delivered).
    Unknown,
    /// Modified with delivery-failed, and that failure reached the
    /// delivery limit (`delivery_limit.rs`): the message is out of the
    /// queue; here it is, to be dead-lettered or dropped.
    AtLimit(Entry),
}

/// Waiting messages and the consumers they go to.
#[derive(Debug, Default)]
pub(crate) struct Dispatcher {
    next_consumer: u64,
    /// Never-delivered messages, oldest first (so in increasing id order).
    ready: VecDeque<Entry>,
    /// Messages that came back from consumers, served first, in id order.
    returned: BTreeMap<MessageId, Entry>,
    /// Messages out with a consumer, not yet settled.
    out: HashMap<MessageId, (ConsumerId, Entry)>,
    consumers: HashMap<ConsumerId, Consumer>,
    /// Consumers with credit, in round-robin order.
    waiting: VecDeque<ConsumerId>,
    /// Priorities, registration order, the single active consumer.
    order: ConsumerOrder,
    /// Deliveries pushed to consumers so far (for metrics).
    delivered_total: u64,
    /// Deliveries settled accepted or rejected so far (for metrics).
    acknowledged_total: u64,
    /// The queue's effective policy (`policy.rs`), set by the queue's
    /// owner; `None` (nearly always) costs nothing per message. Kept by
    /// `clear`, so a quorum queue's replica keeps it across leaderships.
    policy: Option<Arc<QueuePolicy>>,
    /// Expired messages found at dispatch, never delivered, for the owner
    /// to remove (`expiry.rs`); empty unless messages have an expiry.
    expired: Vec<Entry>,
}

impl Dispatcher {
    /// The queue's effective policy, if one matches its address.
    pub(crate) fn policy(&self) -> Option<&Arc<QueuePolicy>> {
        self.policy.as_ref()
    }

    /// Put the queue's (new) effective policy in force.
    pub(crate) fn set_policy(&mut self, policy: Option<Arc<QueuePolicy>>) {
        self.policy = policy;
        // Single active consumer may have been turned on or off.
        self.dispatch();
    }

    /// Whether message `id` is out with a consumer.
    pub(crate) fn is_out(&self, id: MessageId) -> bool {
        self.out.contains_key(&id)
    }

    /// Take the expired messages set aside at dispatch.
    pub(crate) fn take_expired(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.expired)
    }

    /// Whether dispatch set expired messages aside.
    pub(crate) fn has_expired(&self) -> bool {
        !self.expired.is_empty()
    }

    /// The oldest message waiting (returned ones included), if any.
    pub(crate) fn oldest_waiting(&self) -> Option<&Entry> {
        match (self.returned.values().next(), self.ready.front()) {
            (Some(r), Some(f)) => Some(if r.id < f.id { r } else { f }),
            (r, f) => r.or(f),
        }
    }

    /// Remove and return the oldest message waiting (drop-head, expiry).
    pub(crate) fn pop_oldest_waiting(&mut self) -> Option<Entry> {
        let returned = self.returned.keys().next().copied();
        match (returned, self.ready.front().map(|e| e.id)) {
            (Some(r), Some(f)) if f < r => self.ready.pop_front(),
            (Some(r), _) => self.returned.remove(&r),
            (None, _) => self.ready.pop_front(),
        }
    }

    /// Messages waiting (not out with a consumer).
    pub(crate) fn n_ready(&self) -> usize {
        self.ready.len() + self.returned.len()
    }

    /// Messages out with consumers.
    pub(crate) fn n_out(&self) -> usize {
        self.out.len()
    }

    /// Whether a consumer still has credit left to use.
    pub(crate) fn has_waiting_credit(&self) -> bool {
        self.waiting
            .iter()
            .any(|id| self.consumers.get(id).is_some_and(|c| c.credit() > 0))
    }

    pub(crate) fn n_consumers(&self) -> usize {
        self.consumers.len()
    }

    /// Deliveries pushed to consumers since the dispatcher was made.
    pub(crate) fn delivered_total(&self) -> u64 {
        self.delivered_total
    }

    /// Deliveries settled accepted or rejected since it was made.
    pub(crate) fn acknowledged_total(&self) -> u64 {
        self.acknowledged_total
    }

    /// Add a message at the back and hand it out if someone has credit.
    pub(crate) fn push(&mut self, entry: Entry) {
        debug_assert!(self.ready.back().is_none_or(|last| last.id < entry.id));
        self.ready.push_back(entry);
        self.dispatch();
    }

    /// Make message `id`'s delivery-count at least `count`, wherever it is
    /// (a replicated failed delivery the dispatcher did not count itself).
    pub(crate) fn raise_delivery_count(&mut self, id: MessageId, count: u32) {
        let entry = match self.returned.get_mut(&id) {
            Some(entry) => Some(entry),
            None => match self.out.get_mut(&id) {
                Some((_, entry)) => Some(entry),
                None => self
                    .ready
                    .binary_search_by_key(&id, |e| e.id)
                    .ok()
                    .and_then(|index| self.ready.get_mut(index)),
            },
        };
        if let Some(entry) = entry {
            entry.delivery_count = entry.delivery_count.max(count);
        }
    }

    /// Forget a message wherever it is (settled elsewhere).
    pub(crate) fn remove(&mut self, id: MessageId) {
        if self.out.remove(&id).is_some() || self.returned.remove(&id).is_some() {
            return;
        }
        // `ready` is in id order (messages are pushed with increasing ids),
        // so this is a binary search, not a scan: settlements replayed on a
        // leader with a deep queue must not cost O(depth) each.
        if let Ok(index) = self.ready.binary_search_by_key(&id, |e| e.id) {
            self.ready.remove(index);
        }
    }

    /// Drop every message and consumer (a quorum queue's leader stepping
    /// down); returns each consumer with its sink, tag, delivery-count
    /// and credit limit, so it can be told or handed to the new leader.
    pub(crate) fn clear(&mut self) -> Vec<ClearedConsumer> {
        self.ready.clear();
        self.returned.clear();
        self.expired.clear();
        self.out.clear();
        self.waiting.clear();
        self.order.clear();
        self.consumers
            .drain()
            .map(|(id, c)| ClearedConsumer {
                id,
                sink: c.sink,
                tag: c.tag,
                delivery_count: c.delivery_count,
                credit_limit: c.credit_limit,
            })
            .collect()
    }

    /// Drop every message waiting to be delivered (a purge); messages out
    /// with consumers stay theirs to settle. Returns what was dropped.
    pub(crate) fn purge_waiting(&mut self) -> Vec<Entry> {
        let mut dropped: Vec<Entry> = std::mem::take(&mut self.returned).into_values().collect();
        dropped.extend(self.ready.drain(..));
        dropped
    }

    /// The ids of the messages out with consumers.
    pub(crate) fn out_ids(&self) -> Vec<MessageId> {
        self.out.keys().copied().collect()
    }

    pub(crate) fn subscribe(
        &mut self,
        sink: Sink,
        tag: u64,
        options: ConsumerOptions,
    ) -> ConsumerId {
        self.subscribe_at(sink, tag, 0, options)
    }

    /// Add a consumer whose link has already counted `delivery_count`
    /// deliveries (one that moves here from another leader); its credit
    /// comes with the next [`Dispatcher::flow`].
    pub(crate) fn subscribe_at(
        &mut self,
        sink: Sink,
        tag: u64,
        delivery_count: u32,
        options: ConsumerOptions,
    ) -> ConsumerId {
        let id = ConsumerId(self.next_consumer);
        self.next_consumer += 1;
        self.order.add(id, options.priority, options.registered);
        self.consumers.insert(
            id,
            Consumer {
                sink,
                tag,
                delivery_count,
                credit_limit: delivery_count,
                waiting: false,
                options,
                scanned: None,
            },
        );
        id
    }

    /// Whether the queue's policy asks for a single active consumer.
    pub(crate) fn single_active(&self) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|p| p.single_active_consumer)
    }

    /// New consumers' registration stamps go above every earlier
    /// epoch's (see `consumer_order.rs`).
    pub(crate) fn set_epoch(&mut self, epoch: u64) {
        self.order.set_epoch(epoch);
    }

    /// A consumer's registration stamp.
    pub(crate) fn stamp(&self, consumer: ConsumerId) -> Option<u64> {
        self.order.stamp(consumer)
    }

    /// Activate no single active consumer until [`Self::release_activation`].
    pub(crate) fn hold_activation(&mut self) -> u64 {
        self.order.hold()
    }

    /// End hold `hold` and deliver; whether it was still in force.
    pub(crate) fn release_activation(&mut self, hold: u64) -> bool {
        let released = self.order.release(hold);
        if released {
            self.dispatch();
        }
        released
    }

    /// A consumer's delivery-count and credit limit.
    pub(crate) fn consumer_position(&self, consumer: ConsumerId) -> Option<(u32, u32)> {
        self.consumers
            .get(&consumer)
            .map(|c| (c.delivery_count, c.credit_limit))
    }

    /// Set a consumer's credit limit; with `drain`, push what is there and
    /// then report the rest of the credit as used.
    pub(crate) fn flow(&mut self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        let Some(c) = self.consumers.get_mut(&consumer) else {
            return;
        };
        c.credit_limit = credit_limit;
        if c.credit() > 0 && !c.waiting {
            c.waiting = true;
            self.waiting.push_back(consumer);
        }
        self.dispatch();
        if drain {
            if let Some(c) = self.consumers.get_mut(&consumer) {
                if c.credit() > 0 {
                    c.delivery_count = c.credit_limit;
                }
                c.waiting = false;
                let limit = c.credit_limit;
                c.sink.send(
                    c.tag,
                    QueueEventKind::Drained {
                        credit_limit: limit,
                    },
                );
                self.waiting.retain(|w| *w != consumer);
            }
        }
    }

    /// Apply a consumer's outcome to a message it holds.
    pub(crate) fn settle(
        &mut self,
        consumer: ConsumerId,
        message: MessageId,
        outcome: Outcome,
    ) -> Settled {
        let Some((owner, mut entry)) = self.out.remove(&message) else {
            return Settled::Unknown;
        };
        if owner != consumer {
            self.out.insert(message, (owner, entry));
            return Settled::Unknown;
        }
        match outcome {
            Outcome::Accepted | Outcome::Rejected => {
                self.acknowledged_total += 1;
                return Settled::Removed(entry);
            }
            Outcome::Released => {}
            Outcome::Modified {
                delivery_failed,
                undeliverable_here,
            } => {
                if delivery_failed {
                    entry.delivery_count = entry.delivery_count.saturating_add(1);
                    if self.at_limit(entry.delivery_count) {
                        return Settled::AtLimit(entry);
                    }
                }
                if undeliverable_here {
                    entry.excluded.push(consumer);
                }
            }
        }
        entry.redelivered = true;
        self.returned.insert(message, entry);
        self.dispatch();
        Settled::Returned
    }

    /// Remove a consumer; its unsettled messages wait again, in order.
    pub(crate) fn unsubscribe(&mut self, consumer: ConsumerId) {
        self.remove_consumer(consumer);
        self.dispatch();
    }

    /// The oldest message `consumer` may take, removed from the queue.
    fn take_for(&mut self, consumer: ConsumerId) -> Option<Entry> {
        let c = self.consumers.get_mut(&consumer)?;
        if let Some(filter) = c.options.filter.as_deref() {
            return take_matching(
                &mut self.returned,
                &mut self.ready,
                consumer,
                filter,
                &mut c.scanned,
            );
        }
        if let Some(id) = self
            .returned
            .iter()
            .find(|(_, e)| !e.excluded.contains(&consumer))
            .map(|(id, _)| *id)
        {
            return self.returned.remove(&id);
        }
        let index = self
            .ready
            .iter()
            .position(|e| !e.excluded.contains(&consumer))?;
        self.ready.remove(index)
    }

    /// Hand out messages to waiting consumers, round-robin, within credit.
    fn dispatch(&mut self) {
        let mut passed_over = Vec::new();
        let single_active = self.single_active();
        while self.n_ready() > 0 {
            let out = &self.out;
            let holds = |c| out.values().any(|(owner, _)| *owner == c);
            let Some(id) = self.order.pick(&mut self.waiting, single_active, holds) else {
                break;
            };
            let Some(consumer) = self.consumers.get_mut(&id) else {
                continue;
            };
            if consumer.credit() == 0 {
                consumer.waiting = false;
                continue;
            }
            let Some(entry) = self.take_for(id) else {
                // Everything left excludes this consumer.
                passed_over.push(id);
                continue;
            };
            if super::expiry::expired(&entry) {
                self.expired.push(entry);
                self.waiting.push_front(id);
                continue;
            }
            self.push_to(id, entry);
        }
        self.waiting.extend(passed_over);
    }

    /// Push one message to a consumer that has credit, and requeue the
    /// consumer if it still has credit.
    fn push_to(&mut self, id: ConsumerId, entry: Entry) {
        let Some(consumer) = self.consumers.get_mut(&id) else {
            self.returned.insert(entry.id, entry);
            return;
        };
        let delivery = Delivery {
            id: entry.id,
            message: entry.message.clone(),
            delivery_count: entry.delivery_count,
            redelivered: entry.redelivered,
        };
        if !consumer
            .sink
            .send(consumer.tag, QueueEventKind::Deliver(delivery))
        {
            // The connection vanished without unsubscribing: treat it as gone.
            self.returned.insert(entry.id, entry);
            self.remove_consumer(id);
            return;
        }
        consumer.delivery_count = consumer.delivery_count.wrapping_add(1);
        self.delivered_total += 1;
        let more = consumer.credit() > 0;
        consumer.waiting = more;
        self.out.insert(entry.id, (id, entry));
        if more {
            self.waiting.push_back(id);
        }
    }

    fn remove_consumer(&mut self, id: ConsumerId) {
        self.consumers.remove(&id);
        self.order.remove(id);
        self.waiting.retain(|c| *c != id);
        let mine: Vec<MessageId> = self
            .out
            .iter()
            .filter(|(_, (owner, _))| *owner == id)
            .map(|(message, _)| *message)
            .collect();
        for message in mine {
            if let Some((_, mut entry)) = self.out.remove(&message) {
                entry.redelivered = true;
                self.returned.insert(message, entry);
            }
        }
        // A consumer left: what is empty now gives its table back, so a
        // queue left idle keeps none (`shed.rs`).
        shed_map(&mut self.consumers);
        shed_map(&mut self.out);
        shed_deque(&mut self.waiting);
        shed_deque(&mut self.ready);
    }
}

#[cfg(test)]
#[path = "dispatch_shed_tests.rs"]
mod shed_tests;
