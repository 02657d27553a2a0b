//! A quorum queue's policy length limit under overflow reject-publish,
//! decided by the leader before it proposes a publish: a publish that does
//! not fit (the messages and bytes in the replicated index, plus the
//! publishes proposed and not yet committed) is answered `rejected` and
//! never enters the log, so the replicas cannot disagree. While the queue
//! is full its publishers get no new credit; they wait in `room_waiters`
//! and are woken as the log applies removals (`state_machine.rs`).
//!
//! Drop-head is the sweep's (`discard.rs`): it logs which messages go.

use std::sync::atomic::Ordering;

use super::queue::QuorumQueue;
use super::state_machine::Inner;
use crate::queue::{QueueEventKind, Sink};

impl Inner {
    /// Whether the queue is at its policy's reject-publish limit, counting
    /// `in_flight` proposed publishes as held (their bytes are not known
    /// here: only the replicated bytes count).
    pub(crate) fn full_for(&self, in_flight: usize) -> bool {
        let held = self.index.len() as u64 + in_flight as u64;
        self.dispatcher
            .policy()
            .is_some_and(|p| p.rejects_publish() && p.is_full(held, self.index.bytes()))
    }

    /// Whether one more message of `len` bytes is refused.
    pub(crate) fn refuses(&self, in_flight: usize, len: u64) -> bool {
        let held = self.index.len() as u64 + in_flight as u64;
        self.dispatcher
            .policy()
            .is_some_and(|p| p.rejects_publish() && !p.admits(held, self.index.bytes(), len))
    }

    /// Whether `messages` more messages of `bytes` in all fit (a
    /// transaction asks before it commits anywhere).
    pub(crate) fn has_room_for(&self, in_flight: usize, messages: usize, bytes: u64) -> bool {
        let held = (self.index.len() + in_flight + messages) as u64;
        self.dispatcher.policy().is_none_or(|p| {
            !p.rejects_publish() || !p.over_limit(held, self.index.bytes().saturating_add(bytes))
        })
    }

    /// After the log applied: wake the publishers waiting for room, if
    /// there is some (each asks again, and waits again if not).
    pub(crate) fn wake_room_waiters(&mut self) {
        if self.room_waiters.is_empty() || self.full_for(0) {
            return;
        }
        for (sink, tag) in self.room_waiters.drain(..) {
            sink.send(tag, QueueEventKind::Capacity);
        }
    }
}

impl QuorumQueue {
    /// Whether a publisher may get credit as far as the policy's limit
    /// goes; if not, it is woken once there is room.
    pub(super) fn policy_room(&self, sink: &Sink, tag: u64) -> bool {
        if !self.rejects_publish.load(Ordering::Acquire) {
            return true;
        }
        let mut inner = self.shared.lock();
        if !inner.full_for(self.gate.in_flight.load(Ordering::Acquire)) {
            return true;
        }
        if !inner
            .room_waiters
            .iter()
            .any(|(s, t)| *t == tag && s.same_connection(sink))
        {
            inner.room_waiters.push((sink.clone(), tag));
        }
        false
    }
}
