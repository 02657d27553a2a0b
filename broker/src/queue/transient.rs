//! The transient queue: FIFO in memory on this node, competing consumers
//! served round-robin within their credit, unsettled messages tracked per
//! consumer and returned in order when a consumer goes away.
//!
//! All state sits behind one short `std::sync::Mutex`; no method awaits, so
//! the lock is never held across an await. Deliveries are pushed to the
//! consumer's [`Sink`] while the lock is held (an unbounded send never
//! blocks), which keeps FIFO order per consumer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use super::address::QueueAddress;
use super::message::{Delivery, Message, MessageId};
use super::sink::{QueueEventKind, Sink};
use super::{ConsumerId, Outcome, PublishConfirm, PublishStatus, Queue, QueueError, QueueStats};

/// A message waiting in the queue or out with a consumer.
#[derive(Debug)]
struct Entry {
    id: MessageId,
    message: Message,
    delivery_count: u32,
    redelivered: bool,
    /// Consumers that answered `modified` with undeliverable-here; empty
    /// (no allocation) for nearly every message.
    excluded: Vec<ConsumerId>,
}

#[derive(Debug)]
struct Consumer {
    sink: Sink,
    tag: u64,
    /// Deliveries pushed so far, in the link's delivery-count space.
    delivery_count: u32,
    /// Push while `delivery_count` is before this (serial arithmetic).
    credit_limit: u32,
    /// Whether the consumer sits in `State::waiting`.
    waiting: bool,
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

#[derive(Debug, Default)]
struct State {
    next_id: MessageId,
    next_consumer: u64,
    /// Never-delivered messages, oldest first.
    ready: VecDeque<Entry>,
    /// Messages that came back from consumers; all older than `ready`, so
    /// they are served first, in id order.
    returned: BTreeMap<MessageId, Entry>,
    /// Messages out with a consumer, not yet settled.
    out: HashMap<MessageId, (ConsumerId, Entry)>,
    consumers: HashMap<ConsumerId, Consumer>,
    /// Consumers with credit, in round-robin order.
    waiting: VecDeque<ConsumerId>,
    /// Bytes of every message held (ready, returned and out).
    bytes: u64,
    /// Publishers to wake when there is room again.
    capacity_waiters: Vec<(Sink, u64)>,
}

/// An in-memory queue.
#[derive(Debug)]
pub struct TransientQueue {
    address: QueueAddress,
    max_messages: usize,
    max_bytes: u64,
    state: Mutex<State>,
}

impl TransientQueue {
    /// An empty queue with the given limits (beyond them, publishers stop
    /// getting credit until consumers take messages).
    pub fn new(address: QueueAddress, max_messages: usize, max_bytes: u64) -> Self {
        TransientQueue {
            address,
            max_messages,
            max_bytes,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent enough
        // to keep serving (every mutation is a single step); keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn full(&self, state: &State) -> bool {
        let held = state.ready.len() + state.returned.len() + state.out.len();
        held >= self.max_messages || state.bytes >= self.max_bytes
    }

    fn wake_publishers(&self, state: &mut State) {
        if !state.capacity_waiters.is_empty() && !self.full(state) {
            for (sink, tag) in state.capacity_waiters.drain(..) {
                sink.send(tag, QueueEventKind::Capacity);
            }
        }
    }
}

impl State {
    /// The oldest message `consumer` may take, removed from the queue.
    fn take_for(&mut self, consumer: ConsumerId) -> Option<Entry> {
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

    fn has_messages(&self) -> bool {
        !self.ready.is_empty() || !self.returned.is_empty()
    }

    /// Hand out messages to waiting consumers, round-robin, within credit.
    fn dispatch(&mut self) {
        let mut passed_over = Vec::new();
        while self.has_messages() {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            let Some(consumer) = self.consumers.get(&id) else {
                continue;
            };
            if consumer.credit() == 0 {
                if let Some(c) = self.consumers.get_mut(&id) {
                    c.waiting = false;
                }
                continue;
            }
            let Some(entry) = self.take_for(id) else {
                // Everything left excludes this consumer.
                passed_over.push(id);
                continue;
            };
            self.push_to(id, entry);
        }
        for id in passed_over {
            self.waiting.push_back(id);
        }
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
        let more = consumer.credit() > 0;
        consumer.waiting = more;
        self.out.insert(entry.id, (id, entry));
        if more {
            self.waiting.push_back(id);
        }
    }

    fn remove_consumer(&mut self, id: ConsumerId) {
        self.consumers.remove(&id);
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
    }
}

impl Queue for TransientQueue {
    fn address(&self) -> &QueueAddress {
        &self.address
    }

    fn publish(
        &self,
        message: Message,
        _confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError> {
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.bytes += message.len() as u64;
        let delivery_count = message.published_delivery_count();
        let entry = Entry {
            id,
            message,
            delivery_count,
            redelivered: false,
            excluded: Vec::new(),
        };
        state.ready.push_back(entry);
        state.dispatch();
        // The transient queue takes the message as soon as it holds it.
        Ok(PublishStatus::Accepted)
    }

    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool {
        let mut state = self.lock();
        if !self.full(&state) {
            return true;
        }
        if !state
            .capacity_waiters
            .iter()
            .any(|(s, t)| *t == tag && s.same_connection(sink))
        {
            state.capacity_waiters.push((sink.clone(), tag));
        }
        false
    }

    fn subscribe(&self, sink: Sink, tag: u64) -> Result<ConsumerId, QueueError> {
        let mut state = self.lock();
        let id = ConsumerId(state.next_consumer);
        state.next_consumer += 1;
        state.consumers.insert(
            id,
            Consumer {
                sink,
                tag,
                delivery_count: 0,
                credit_limit: 0,
                waiting: false,
            },
        );
        Ok(id)
    }

    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        let mut state = self.lock();
        let Some(c) = state.consumers.get_mut(&consumer) else {
            return;
        };
        c.credit_limit = credit_limit;
        if c.credit() > 0 && !c.waiting {
            c.waiting = true;
            state.waiting.push_back(consumer);
        }
        state.dispatch();
        if drain {
            if let Some(c) = state.consumers.get_mut(&consumer) {
                if c.credit() > 0 {
                    c.delivery_count = c.credit_limit;
                }
                let limit = c.credit_limit;
                c.sink.send(
                    c.tag,
                    QueueEventKind::Drained {
                        credit_limit: limit,
                    },
                );
            }
        }
    }

    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome) {
        let mut state = self.lock();
        let Some((owner, mut entry)) = state.out.remove(&message) else {
            return;
        };
        if owner != consumer {
            // Not this consumer's to settle: put it back untouched.
            state.out.insert(message, (owner, entry));
            return;
        }
        match outcome {
            Outcome::Accepted | Outcome::Rejected => {
                state.bytes -= entry.message.len() as u64;
                self.wake_publishers(&mut state);
                return;
            }
            Outcome::Released => {}
            Outcome::Modified {
                delivery_failed,
                undeliverable_here,
            } => {
                if delivery_failed {
                    entry.delivery_count = entry.delivery_count.saturating_add(1);
                }
                if undeliverable_here {
                    entry.excluded.push(consumer);
                }
            }
        }
        entry.redelivered = true;
        state.returned.insert(message, entry);
        state.dispatch();
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let mut state = self.lock();
        state.remove_consumer(consumer);
        state.dispatch();
    }

    fn stats(&self) -> QueueStats {
        let state = self.lock();
        QueueStats {
            address: self.address.to_string(),
            ready: state.ready.len() + state.returned.len(),
            unsettled: state.out.len(),
            consumers: state.consumers.len(),
        }
    }
}
