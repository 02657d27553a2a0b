//! The transient queue: a [`Dispatcher`] in memory on this node, plus the
//! limits that hold publishers back when it is full, and its policy's
//! length limit (reject-publish, drop-head) and message TTL.
//!
//! All state sits behind one short `std::sync::Mutex`; no method awaits, so
//! the lock is never held across an await. Deliveries are pushed to the
//! consumer's [`Sink`] while the lock is held (an unbounded send never
//! blocks), which keeps FIFO order per consumer.

use std::sync::{Arc, Mutex, MutexGuard};

use super::address::QueueAddress;
use super::dead_letter::{self, DeathReason, SharedRouter};
use super::dispatch::{Dispatcher, Entry, Settled};
use super::expiry;
use super::message::{Message, MessageId};
use super::policy::QueuePolicy;
use super::resource_alarm::ResourceAlarm;
use super::sink::{QueueEventKind, Sink};
use crate::codec::definitions::condition::RESOURCE_DELETED;

use super::{
    ConsumerId, ConsumerOptions, Outcome, PublishConfirm, PublishStatus, Queue, QueueError,
    QueueStats, TxnPart,
};

#[derive(Debug, Default)]
struct State {
    next_id: MessageId,
    dispatcher: Dispatcher,
    /// Bytes of every message held (waiting and out with consumers).
    bytes: u64,
    /// Messages taken in so far (for metrics).
    published_total: u64,
    /// Publishers to wake when there is room again.
    capacity_waiters: Vec<(Sink, u64)>,
    /// Deleted: refuses everything with [`QueueError::Gone`].
    deleted: bool,
    /// It has taken messages with an expiry since it was last empty: the
    /// node's sweep looks at it.
    expiring: bool,
}

impl State {
    /// Messages held (waiting and out with consumers).
    fn held(&self) -> u64 {
        (self.dispatcher.n_ready() + self.dispatcher.n_out()) as u64
    }
}

/// An in-memory queue.
#[derive(Debug)]
pub struct TransientQueue {
    address: QueueAddress,
    max_messages: usize,
    max_bytes: u64,
    /// The node's resource alarm: no publisher credit while its memory
    /// part is raised.
    alarm: Option<Arc<ResourceAlarm>>,
    /// Publishes dead-lettered messages (handed in by the node).
    router: Option<SharedRouter>,
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
            alarm: None,
            router: None,
            state: Mutex::new(State::default()),
        }
    }

    /// Hold publishers back while the node's memory alarm is raised.
    pub(crate) fn with_alarm(mut self, alarm: Arc<ResourceAlarm>) -> Self {
        self.alarm = Some(alarm);
        self
    }

    /// Put the queue's effective policy in force (see `policy.rs`).
    pub fn set_policy(&self, policy: Option<Arc<QueuePolicy>>) {
        let mut state = self.lock();
        state.dispatcher.set_policy(policy);
        // A raised or removed limit may make room.
        self.wake_publishers(&mut state);
    }

    /// The queue's effective policy.
    pub fn policy(&self) -> Option<Arc<QueuePolicy>> {
        self.lock().dispatcher.policy().cloned()
    }

    /// Publish dead-lettered messages through `router`.
    pub(crate) fn with_dead_letter_router(mut self, router: SharedRouter) -> Self {
        self.router = Some(router);
        self
    }

    /// Dead-letter (or drop) what the queue gave up on, once its lock is
    /// released (the dead-letter queue may be this one).
    fn give_up(&self, mut state: MutexGuard<'_, State>, given_up: Vec<(Message, DeathReason)>) {
        for (message, _) in &given_up {
            state.bytes -= message.len() as u64;
        }
        self.wake_publishers(&mut state);
        let target = state
            .dispatcher
            .policy()
            .and_then(|p| p.dead_letter_address.clone());
        drop(state);
        dead_letter::send_best_effort(
            self.router.as_ref(),
            &self.address,
            target.as_ref(),
            given_up,
        );
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation is a single step on plain data, so a panic while
        // holding the lock cannot leave it half-changed: keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn full(&self, state: &State) -> bool {
        let held = state.dispatcher.n_ready() + state.dispatcher.n_out();
        held >= self.max_messages
            || state.bytes >= self.max_bytes
            || state
                .dispatcher
                .policy()
                .is_some_and(|p| p.rejects_publish() && p.is_full(held as u64, state.bytes))
    }

    /// Take `message` in: its id, its expiry (`expiry.rs`), the counts.
    fn enqueue(&self, state: &mut State, message: Message) {
        let id = state.next_id;
        state.next_id += 1;
        state.bytes += message.len() as u64;
        state.published_total += 1;
        let mut entry = Entry::new(id, message);
        entry.expires_at =
            expiry::expires_at(&entry.message, state.dispatcher.policy().map(|p| &**p));
        state.expiring |= entry.expires_at != 0;
        state.dispatcher.push(entry);
    }

    /// After messages came in or moved: the expired messages dispatch set
    /// aside, and under drop-head the oldest waiting ones while the queue
    /// is past its policy's length limit, taken out of the dispatcher, for
    /// [`TransientQueue::give_up`] (which dead-letters them, or drops them
    /// without a dead-letter address, and fixes the byte count).
    fn enforce_policy(&self, state: &mut State) -> Vec<(Message, DeathReason)> {
        let mut given_up = Vec::new();
        if state.dispatcher.has_expired() {
            let expired = state.dispatcher.take_expired();
            given_up.extend(
                expired
                    .into_iter()
                    .map(|e| (e.message, DeathReason::Expired)),
            );
        }
        let Some(policy) = state
            .dispatcher
            .policy()
            .filter(|p| p.drops_head())
            .cloned()
        else {
            return given_up;
        };
        let mut bytes = state.bytes - given_up.iter().map(|(m, _)| m.len() as u64).sum::<u64>();
        while policy.over_limit(state.held(), bytes) {
            let Some(entry) = state.dispatcher.pop_oldest_waiting() else {
                // What is left is out with consumers: theirs to settle.
                break;
            };
            bytes -= entry.message.len() as u64;
            given_up.push((entry.message, DeathReason::Maxlen));
        }
        given_up
    }

    /// The node's sweep (`node/expiry_sweep.rs`): remove (dead-letter) the
    /// expired messages at the head of the queue; how many. Costs one lock
    /// when the queue never had a message with an expiry.
    pub fn sweep_expired(&self) -> usize {
        let mut state = self.lock();
        if !state.expiring {
            return 0;
        }
        let gone = expiry::sweep(&mut state.dispatcher, expiry::now_ms());
        if state.held() == 0 {
            state.expiring = false;
        }
        let n = gone.len();
        if n > 0 {
            let given_up = gone
                .into_iter()
                .map(|e| (e.message, DeathReason::Expired))
                .collect();
            self.give_up(state, given_up);
        }
        n
    }

    /// Delete the queue: its consumers are closed with
    /// amqp:resource-deleted, what it held is dropped, and every later
    /// publish or subscribe is refused with [`QueueError::Gone`] (so a
    /// publisher link still attached is detached with the same condition
    /// on its next message). Waiting publishers are woken to find out.
    pub fn delete(&self) {
        let mut state = self.lock();
        state.deleted = true;
        state.bytes = 0;
        for consumer in state.dispatcher.clear() {
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition: RESOURCE_DELETED,
                    description: format!("queue {} was deleted", self.address),
                },
            );
        }
        for (sink, tag) in state.capacity_waiters.drain(..) {
            sink.send(tag, QueueEventKind::Capacity);
        }
    }

    /// Drop every message waiting to be delivered; messages out with
    /// consumers stay theirs to settle. Returns how many were dropped.
    pub fn purge(&self) -> usize {
        let mut state = self.lock();
        let dropped = state.dispatcher.purge_waiting();
        let bytes: u64 = dropped.iter().map(|e| e.message.len() as u64).sum();
        state.bytes -= bytes;
        self.wake_publishers(&mut state);
        dropped.len()
    }

    fn gone(&self) -> QueueError {
        QueueError::Gone(self.address.to_string())
    }

    fn wake_publishers(&self, state: &mut State) {
        if !state.capacity_waiters.is_empty() && !self.full(state) {
            for (sink, tag) in state.capacity_waiters.drain(..) {
                sink.send(tag, QueueEventKind::Capacity);
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
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError> {
        let mut state = self.lock();
        if state.deleted {
            return Err(self.gone());
        }
        let refused = state.dispatcher.policy().is_some_and(|p| {
            p.rejects_publish() && !p.admits(state.held(), state.bytes, message.len() as u64)
        });
        if refused {
            drop(state);
            // Reported as a pending outcome: the engine answers `rejected`
            // with amqp:resource-limit-exceeded.
            if let Some(confirm) = confirm {
                confirm.report(Outcome::Rejected);
            }
            return Ok(PublishStatus::Pending);
        }
        self.enqueue(&mut state, message);
        let given_up = self.enforce_policy(&mut state);
        if !given_up.is_empty() {
            self.give_up(state, given_up);
        }
        // The transient queue takes the message as soon as it holds it.
        Ok(PublishStatus::Accepted)
    }

    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool {
        if let Some(alarm) = self.alarm.as_ref().filter(|a| a.is_memory_raised()) {
            alarm.wait(sink, tag);
            // Re-check: it may have cleared before the wait was recorded.
            if alarm.is_memory_raised() {
                return false;
            }
        }
        let mut state = self.lock();
        if !self.full(&state) || state.deleted {
            // A deleted queue lets the publisher send, to be refused.
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

    fn subscribe(
        &self,
        sink: Sink,
        tag: u64,
        options: ConsumerOptions,
    ) -> Result<ConsumerId, QueueError> {
        let mut state = self.lock();
        if state.deleted {
            return Err(self.gone());
        }
        Ok(state.dispatcher.subscribe(sink, tag, options))
    }

    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        let mut state = self.lock();
        state.dispatcher.flow(consumer, credit_limit, drain);
        let given_up = self.enforce_policy(&mut state);
        if !given_up.is_empty() {
            self.give_up(state, given_up);
        }
    }

    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome) {
        let mut state = self.lock();
        let reason = match state.dispatcher.settle(consumer, message, outcome) {
            Settled::Removed(entry) if outcome == Outcome::Rejected => {
                Some((entry, DeathReason::Rejected))
            }
            Settled::Removed(entry) => {
                state.bytes -= entry.message.len() as u64;
                self.wake_publishers(&mut state);
                None
            }
            Settled::AtLimit(entry) => Some((entry, DeathReason::DeliveryLimit)),
            Settled::Returned | Settled::Unknown => None,
        };
        let mut given_up = self.enforce_policy(&mut state);
        if let Some((entry, reason)) = reason {
            given_up.push((entry.message, reason));
        }
        if !given_up.is_empty() {
            self.give_up(state, given_up);
        }
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let mut state = self.lock();
        // With a delivery limit, leaving without settling counts a failure.
        let (_, over) = state.dispatcher.count_abandoned(consumer);
        state.dispatcher.unsubscribe(consumer);
        let mut given_up = self.enforce_policy(&mut state);
        given_up.extend(
            over.into_iter()
                .map(|e| (e.message, DeathReason::DeliveryLimit)),
        );
        if !given_up.is_empty() {
            self.give_up(state, given_up);
        }
    }

    fn has_room_for(&self, messages: usize, bytes: u64) -> bool {
        let state = self.lock();
        let held = state.dispatcher.n_ready() + state.dispatcher.n_out();
        let policy_room = state.dispatcher.policy().is_none_or(|p| {
            !p.rejects_publish()
                || !p.over_limit((held + messages) as u64, state.bytes.saturating_add(bytes))
        });
        state.deleted
            || (held + messages <= self.max_messages
                && state.bytes.saturating_add(bytes) <= self.max_bytes
                && policy_room)
    }

    fn commit(&self, part: TxnPart, _confirm: PublishConfirm) -> Result<PublishStatus, QueueError> {
        // One lock for the whole part: no consumer sees half of it.
        let mut state = self.lock();
        if state.deleted {
            return Err(self.gone());
        }
        for message in part.messages {
            self.enqueue(&mut state, message);
        }
        let mut given_up = Vec::new();
        for (consumer, message, outcome) in part.settles {
            match state.dispatcher.settle(consumer, message, outcome) {
                Settled::Removed(entry) if outcome == Outcome::Rejected => {
                    given_up.push((entry.message, DeathReason::Rejected));
                }
                Settled::Removed(entry) => state.bytes -= entry.message.len() as u64,
                Settled::AtLimit(entry) => {
                    given_up.push((entry.message, DeathReason::DeliveryLimit));
                }
                Settled::Returned | Settled::Unknown => {}
            }
        }
        given_up.extend(self.enforce_policy(&mut state));
        self.give_up(state, given_up);
        Ok(PublishStatus::Accepted)
    }

    fn stats(&self) -> QueueStats {
        let state = self.lock();
        QueueStats {
            address: self.address.to_string(),
            ready: state.dispatcher.n_ready(),
            unsettled: state.dispatcher.n_out(),
            consumers: state.dispatcher.n_consumers(),
            bytes: state.bytes,
            paged_bytes: 0,
            published_total: state.published_total,
            delivered_total: state.dispatcher.delivered_total(),
            acknowledged_total: state.dispatcher.acknowledged_total(),
        }
    }
}
