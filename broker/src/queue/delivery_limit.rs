//! The delivery limit inside the [`Dispatcher`]: a message that failed
//! delivery as often as the queue allows leaves it, for its owner to
//! dead-letter or drop. A failed delivery is a `modified` with
//! delivery-failed (`Dispatcher::settle` answers `Settled::AtLimit`) or a
//! return by a consumer that went away without settling (counted here,
//! only for a queue with a limit: without one nothing changes).
//!
//! A child module of `dispatch`, so that the dispatcher's fields stay
//! private to it; it knows nothing of what becomes of the messages taken.

use super::{Dispatcher, Entry};
use crate::queue::{ConsumerId, MessageId};

impl Dispatcher {
    /// The policy's delivery limit, if it has one.
    pub(crate) fn delivery_limit(&self) -> Option<u32> {
        self.policy.as_ref().and_then(|p| p.delivery_limit)
    }

    /// Whether a message with `delivery_count` failed deliveries has
    /// reached the limit.
    pub(crate) fn at_limit(&self, delivery_count: u32) -> bool {
        self.delivery_limit()
            .is_some_and(|limit| delivery_count >= limit)
    }

    /// `consumer` is going away without settling what it holds: with a
    /// limit, count a failed delivery on each of those messages and take
    /// out the ones that reach it (the rest return with the consumer's
    /// `unsubscribe`, which the caller makes next). Returns the ids
    /// counted (for the log of a quorum queue) and the entries taken, in
    /// id order; nothing without a limit.
    pub(crate) fn count_abandoned(&mut self, consumer: ConsumerId) -> (Vec<MessageId>, Vec<Entry>) {
        let Some(limit) = self.delivery_limit() else {
            return (Vec::new(), Vec::new());
        };
        let mut counted = Vec::new();
        let mut over = Vec::new();
        for (id, (owner, entry)) in self.out.iter_mut() {
            if *owner != consumer {
                continue;
            }
            entry.delivery_count = entry.delivery_count.saturating_add(1);
            counted.push(*id);
            if entry.delivery_count >= limit {
                over.push(*id);
            }
        }
        counted.sort_unstable();
        over.sort_unstable();
        let taken = over
            .into_iter()
            .filter_map(|id| self.out.remove(&id).map(|(_, entry)| entry))
            .collect();
        (counted, taken)
    }
}
