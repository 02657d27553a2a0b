//! Which waiting consumer the dispatcher serves next, beyond plain
//! round-robin: consumer priorities and single active consumer.
//!
//! - Priorities (RabbitMQ's and Artemis's rule): messages go to the
//!   highest-priority consumers that have credit, round-robin among equals;
//!   a lower one gets messages only while every higher one has no credit
//!   (or cannot take what is left, e.g. its filter matches none of it).
//! - Single active consumer (policy `single_active_consumer`): one consumer
//!   gets messages, the others stay attached and idle. The active one is
//!   the first in *order*: highest priority, then earliest registration.
//!   It keeps the place until it detaches, or until a consumer of higher
//!   priority is there and the active one has nothing unsettled (RabbitMQ's
//!   quorum queues switch the same way); meanwhile nobody gets new messages.
//!
//! Registration order is a *stamp* per consumer, increasing with each
//! subscribe. A quorum queue's leader starts its stamps above every earlier
//! leader's ([`ConsumerOrder::set_epoch`] with its Raft term) and a consumer
//! moved to a new leader brings its stamp with it, so the new leader orders
//! the consumers as the old one did; while it waits for them to come back
//! it holds activation ([`ConsumerOrder::hold`]).
//!
//! Cost: with every priority 0 and no single active consumer (nearly every
//! queue), [`ConsumerOrder::pick`] is the plain `pop_front` of the
//! round-robin queue: no lookup, no allocation per message.
//!
//! It knows consumer ids, priorities and stamps only: no credit, message,
//! sink, node or Raft.

use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

use foldhash::HashMap;

use super::ConsumerId;

/// Stamps of one epoch (a quorum leader's term) stay below the next
/// epoch's: 2^32 subscribes per leadership.
const EPOCH_SHIFT: u32 = 32;

/// The priorities, registration order and active consumer of one queue.
#[derive(Debug, Default)]
pub(crate) struct ConsumerOrder {
    /// Every consumer's priority and stamp.
    ranks: HashMap<ConsumerId, (i32, u64)>,
    /// The same, in order: highest priority first, then lowest stamp.
    ordered: BTreeSet<(Reverse<i32>, u64, ConsumerId)>,
    /// How many consumers have a priority other than 0.
    prioritized: usize,
    /// The stamp the next new consumer gets.
    next_stamp: u64,
    /// Single active consumer: the one that gets messages, once chosen.
    active: Option<ConsumerId>,
    /// Single active consumer: choose nobody yet (a new quorum leader
    /// waiting for its consumers to come back).
    held: bool,
    /// Counts holds, so that a late release of an earlier one is ignored.
    holds: u64,
}

impl ConsumerOrder {
    /// Add a consumer; `stamp` is the one an earlier leader gave it, if
    /// any. Returns its stamp.
    pub(crate) fn add(&mut self, id: ConsumerId, priority: i32, stamp: Option<u64>) -> u64 {
        let stamp = stamp.unwrap_or_else(|| {
            let stamp = self.next_stamp;
            self.next_stamp += 1;
            stamp
        });
        if priority != 0 {
            self.prioritized += 1;
        }
        self.ranks.insert(id, (priority, stamp));
        self.ordered.insert((Reverse(priority), stamp, id));
        stamp
    }

    /// Forget a consumer; if it was the active one, the next in order
    /// takes over at the next pick.
    pub(crate) fn remove(&mut self, id: ConsumerId) {
        if let Some((priority, stamp)) = self.ranks.remove(&id) {
            if priority != 0 {
                self.prioritized -= 1;
            }
            self.ordered.remove(&(Reverse(priority), stamp, id));
        }
        if self.active == Some(id) {
            self.active = None;
        }
    }

    /// Forget every consumer (a quorum leader stepping down); stamps go
    /// on increasing.
    pub(crate) fn clear(&mut self) {
        self.ranks.clear();
        self.ordered.clear();
        self.prioritized = 0;
        self.active = None;
        self.held = false;
    }

    /// New stamps from now on are above every stamp of earlier epochs
    /// (a quorum leader's Raft term: each leader has a higher one).
    pub(crate) fn set_epoch(&mut self, epoch: u64) {
        self.next_stamp = self.next_stamp.max(epoch << EPOCH_SHIFT);
    }

    /// A consumer's stamp.
    pub(crate) fn stamp(&self, id: ConsumerId) -> Option<u64> {
        self.ranks.get(&id).map(|(_, stamp)| *stamp)
    }

    /// Single active consumer: activate nobody until [`Self::release`]
    /// with the returned number.
    pub(crate) fn hold(&mut self) -> u64 {
        self.holds += 1;
        self.held = true;
        self.holds
    }

    /// End hold number `hold` if it is still the one in force; whether it
    /// was (the caller then dispatches).
    pub(crate) fn release(&mut self, hold: u64) -> bool {
        let ends = self.held && self.holds == hold;
        if ends {
            self.held = false;
        }
        ends
    }

    /// The active consumer, if one has been chosen.
    #[cfg(test)]
    pub(crate) fn active(&self) -> Option<ConsumerId> {
        self.active
    }

    /// The first consumer in order.
    fn first(&self) -> Option<ConsumerId> {
        self.ordered.first().map(|(_, _, id)| *id)
    }

    fn priority(&self, id: ConsumerId) -> i32 {
        self.ranks.get(&id).map_or(0, |(priority, _)| *priority)
    }

    /// Take the consumer to serve next out of `waiting` (the consumers
    /// with credit, in round-robin order), or `None` if none may be
    /// served now. `holds_messages` tells whether a consumer has
    /// deliveries unsettled (asked only while a single active consumer
    /// gives way to a higher-priority one).
    pub(crate) fn pick(
        &mut self,
        waiting: &mut VecDeque<ConsumerId>,
        single_active: bool,
        holds_messages: impl Fn(ConsumerId) -> bool,
    ) -> Option<ConsumerId> {
        if single_active {
            let active = self.choose_active(holds_messages)?;
            let at = waiting.iter().position(|id| *id == active)?;
            return waiting.remove(at);
        }
        if self.prioritized == 0 {
            return waiting.pop_front();
        }
        // The first of the highest priority: round-robin among equals,
        // since a served consumer goes to the back.
        let mut best: Option<(usize, i32)> = None;
        for (at, id) in waiting.iter().enumerate() {
            let priority = self.priority(*id);
            if best.is_none_or(|(_, b)| priority > b) {
                best = Some((at, priority));
            }
        }
        waiting.remove(best?.0)
    }

    /// The single active consumer, chosen now if need be; `None` while
    /// held, without consumers, or while the active one gives way.
    fn choose_active(&mut self, holds_messages: impl Fn(ConsumerId) -> bool) -> Option<ConsumerId> {
        if self.held {
            return None;
        }
        let first = self.first()?;
        match self.active {
            Some(active) if active == first => Some(active),
            Some(active) if self.priority(first) <= self.priority(active) => Some(active),
            Some(active) if holds_messages(active) => None,
            _ => {
                self.active = Some(first);
                Some(first)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[u64]) -> VecDeque<ConsumerId> {
        list.iter().map(|i| ConsumerId(*i)).collect()
    }

    fn none(_: ConsumerId) -> bool {
        false
    }

    #[test]
    fn without_priorities_it_is_round_robin() {
        let mut order = ConsumerOrder::default();
        for i in 0..3 {
            order.add(ConsumerId(i), 0, None);
        }
        let mut waiting = ids(&[2, 0, 1]);
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(2)));
        assert_eq!(waiting, ids(&[0, 1]));
    }

    #[test]
    fn the_highest_priority_with_credit_goes_first_round_robin_among_equals() {
        let mut order = ConsumerOrder::default();
        order.add(ConsumerId(0), 0, None);
        order.add(ConsumerId(1), 5, None);
        order.add(ConsumerId(2), 5, None);
        order.add(ConsumerId(3), -1, None);
        let mut waiting = ids(&[0, 3, 1, 2]);
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(1)));
        // Served consumers go to the back (as the dispatcher does).
        waiting.push_back(ConsumerId(1));
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(2)));
        // The high ones ran out of credit: the next priority down.
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(1)));
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(0)));
        assert_eq!(order.pick(&mut waiting, false, none), Some(ConsumerId(3)));
        assert_eq!(order.pick(&mut waiting, false, none), None);
        order.remove(ConsumerId(1));
        order.remove(ConsumerId(2));
        order.remove(ConsumerId(3));
        assert_eq!(order.prioritized, 0, "back to the plain path");
    }

    #[test]
    fn single_active_consumer_serves_the_first_registered_then_the_next() {
        let mut order = ConsumerOrder::default();
        for i in 0..3 {
            order.add(ConsumerId(i), 0, None);
        }
        let mut waiting = ids(&[1, 2, 0]);
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(0)));
        // Without credit the active one is not served, nor anyone else.
        assert_eq!(order.pick(&mut waiting, true, none), None);
        assert_eq!(waiting, ids(&[1, 2]));
        order.remove(ConsumerId(0));
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(1)));
        // A newcomer of the same priority does not take over.
        order.add(ConsumerId(3), 0, None);
        waiting = ids(&[3, 2, 1]);
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(1)));
    }

    #[test]
    fn a_higher_priority_consumer_takes_over_once_the_active_has_settled() {
        let mut order = ConsumerOrder::default();
        order.add(ConsumerId(0), 0, None);
        let mut waiting = ids(&[0]);
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(0)));
        order.add(ConsumerId(1), 3, None);
        waiting = ids(&[0, 1]);
        // The active one still holds deliveries: nobody gets more.
        assert_eq!(order.pick(&mut waiting, true, |_| true), None);
        assert_eq!(order.active(), Some(ConsumerId(0)));
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(1)));
        assert_eq!(order.active(), Some(ConsumerId(1)));
    }

    #[test]
    fn carried_stamps_keep_the_order_of_an_earlier_leader() {
        // The first leader (term 1) registered A then B.
        let mut first = ConsumerOrder::default();
        first.set_epoch(1);
        let a = first.add(ConsumerId(0), 0, None);
        let b = first.add(ConsumerId(1), 0, None);
        // The new leader (term 2) sees B come back first, and a new C.
        let mut order = ConsumerOrder::default();
        order.set_epoch(2);
        let earlier = order.hold();
        assert!(order.release(earlier));
        let hold = order.hold();
        assert!(!order.release(earlier), "an earlier hold's release is late");
        order.add(ConsumerId(10), 0, Some(b));
        let c = order.add(ConsumerId(11), 0, None);
        assert!(c > a && c > b);
        let mut waiting = ids(&[10, 11]);
        assert_eq!(order.pick(&mut waiting, true, none), None, "held");
        order.add(ConsumerId(12), 0, Some(a));
        assert!(order.release(hold));
        waiting.push_back(ConsumerId(12));
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(12)));
        order.remove(ConsumerId(12));
        assert_eq!(order.pick(&mut waiting, true, none), Some(ConsumerId(10)));
    }
}
