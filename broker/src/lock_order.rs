//! The lock order of the broker, written down and checked in debug builds.
//!
//! Two ranked locks are ever held together in one place only: a routed queue's
//! link state (`forward/routed.rs`, [`Rank::RoutedQueue`]) is held while it
//! calls into the local quorum queue, whose state machine lock
//! ([`Rank::QuorumQueue`]) is taken inside. Never the reverse: a quorum
//! queue talks back to routed queues only through sinks (channels). Moving
//! a link to a new leader needs the routed lock across those calls, so the
//! order is kept rather than the nesting removed.
//!
//! The node's map of routed queues (`node/registry.rs`, a plain `RwLock`)
//! is held while its sweep of unused routed queues looks at each one's
//! state ([`Rank::RoutedQueue`]); a routed queue never takes that map.
//!
//! A change of the node's queue policies (`node/policies.rs`,
//! [`Rank::PolicyChange`]) is held while the new set is put on every open
//! queue, each queue's lock taken in turn inside it (a transient queue's
//! plain mutex, a quorum queue's [`Rank::QuorumQueue`]); queues never
//! take it.
//!
//! [`OrderedMutex`] is a `std::sync::Mutex` that, in debug builds, records
//! the ranks a thread holds and panics when a lock is taken while one of an
//! equal or higher rank is held. Release builds pay nothing.

use std::sync::{Mutex, MutexGuard};

/// Lock ranks, lowest first: a thread may take a lock only while every lock
/// it holds has a lower rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// One change of the node's queue policies at a time.
    PolicyChange = 5,
    /// A routed queue's link state.
    RoutedQueue = 10,
    /// A quorum queue's state machine (index and dispatcher).
    QuorumQueue = 20,
}

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::RefCell<Vec<Rank>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A mutex with a rank in the lock order.
#[derive(Debug)]
pub(crate) struct OrderedMutex<T> {
    // Read only by the debug-build check.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    rank: Rank,
    inner: Mutex<T>,
}

/// The guard of an [`OrderedMutex`].
pub(crate) struct OrderedGuard<'a, T> {
    #[cfg(debug_assertions)]
    rank: Rank,
    guard: MutexGuard<'a, T>,
}

impl<T> OrderedMutex<T> {
    pub(crate) fn new(rank: Rank, value: T) -> OrderedMutex<T> {
        OrderedMutex {
            rank,
            inner: Mutex::new(value),
        }
    }

    /// The value, without locking: `&mut self` is the only handle (e.g.
    /// in a `Drop`, which may run under any other lock).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Lock it. A poisoned lock is taken anyway: every step on the guarded
    /// state leaves it consistent.
    pub(crate) fn lock(&self) -> OrderedGuard<'_, T> {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(top) = held.iter().max() {
                assert!(
                    *top < self.rank,
                    "lock order violated: taking {:?} while holding {top:?} (see lock_order.rs)",
                    self.rank
                );
            }
            held.push(self.rank);
        });
        OrderedGuard {
            #[cfg(debug_assertions)]
            rank: self.rank,
            guard: self.inner.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }
}

impl<T> Drop for OrderedGuard<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|r| *r == self.rank) {
                held.remove(at);
            }
        });
    }
}

impl<T> std::ops::Deref for OrderedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for OrderedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn the_written_order_is_allowed() {
        let routed = OrderedMutex::new(Rank::RoutedQueue, ());
        let quorum = OrderedMutex::new(Rank::QuorumQueue, ());
        let _a = routed.lock();
        let _b = quorum.lock();
    }

    #[test]
    #[should_panic(expected = "lock order violated")]
    fn the_reverse_order_panics() {
        let routed = OrderedMutex::new(Rank::RoutedQueue, ());
        let quorum = OrderedMutex::new(Rank::QuorumQueue, ());
        let _b = quorum.lock();
        let _a = routed.lock();
    }

    #[test]
    fn a_released_lock_no_longer_counts() {
        let routed = OrderedMutex::new(Rank::RoutedQueue, ());
        let quorum = OrderedMutex::new(Rank::QuorumQueue, ());
        drop(quorum.lock());
        let _a = routed.lock();
    }
}
