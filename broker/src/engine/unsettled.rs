//! The deliveries a session sent and the peer has not settled, by
//! delivery-id. Ids are assigned in increasing (wrapping) order and peers
//! settle mostly in that order, often as one ranged disposition, so they
//! are kept in a deque in id order rather than a hash map: a settlement is
//! a look at the front (or a binary search), a range is a walk, and no id
//! is hashed.
//!
//! It must not know what a delivery's queue does with a settlement (the
//! caller settles it) or anything of frames.

use std::collections::VecDeque;

use crate::queue::{ConsumerId, MessageId};

/// A delivery we sent and the peer has not settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsettled {
    pub(crate) handle: u32,
    pub(crate) consumer: ConsumerId,
    pub(crate) message: MessageId,
}

/// Settled entries in the middle are kept as holes until they reach the
/// front or outnumber the live ones by this much; then the deque is
/// rebuilt (amortized O(1) per settlement, memory at most about twice the
/// live entries plus this).
const HOLE_SLACK: usize = 1024;

/// Unsettled deliveries of one session, in delivery-id order.
#[derive(Debug, Default)]
pub(crate) struct UnsettledDeliveries {
    /// In increasing wrapping order from the front; `None` is a hole.
    entries: VecDeque<(u32, Option<Unsettled>)>,
    live: usize,
}

impl UnsettledDeliveries {
    /// Deliveries not yet settled.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Record delivery `id`, which must follow every id recorded so far.
    pub(crate) fn insert(&mut self, id: u32, unsettled: Unsettled) {
        debug_assert!(self.entries.back().is_none_or(|(last, _)| {
            let ahead = id.wrapping_sub(*last);
            ahead != 0 && ahead < 1 << 31
        }));
        self.entries.push_back((id, Some(unsettled)));
        self.live += 1;
    }

    /// Where `id` is (or would be): ids compare by their distance from the
    /// front's, which orders them correctly across a wrap of the counter.
    fn search(&self, id: u32) -> Result<usize, usize> {
        let Some(&(front, _)) = self.entries.front() else {
            return Err(0);
        };
        if front == id {
            return Ok(0);
        }
        let target = id.wrapping_sub(front);
        self.entries
            .binary_search_by_key(&target, |(e, _)| e.wrapping_sub(front))
    }

    /// Take every unsettled delivery from `first` to `last` (inclusive,
    /// wrapping), in id order, with its delivery-id.
    pub(crate) fn remove_range(&mut self, first: u32, last: u32) -> Vec<(u32, Unsettled)> {
        let mut taken = Vec::new();
        self.remove_range_each(first, last, |id, unsettled| taken.push((id, unsettled)));
        taken
    }

    /// [`UnsettledDeliveries::remove_range`] handing each delivery to
    /// `each` instead of collecting them: the settlement path, which then
    /// allocates nothing. Returns how many were taken.
    pub(crate) fn remove_range_each(
        &mut self,
        first: u32,
        last: u32,
        mut each: impl FnMut(u32, Unsettled),
    ) -> usize {
        let span = last.wrapping_sub(first);
        let start = match self.entries.front() {
            // The range begins at or before the front (the peer may settle
            // ids already forgotten): walk from the front.
            Some(&(front, _)) if front.wrapping_sub(first) <= span => 0,
            _ => match self.search(first) {
                Ok(i) | Err(i) => i,
            },
        };
        let mut taken = 0;
        for (id, entry) in self.entries.iter_mut().skip(start) {
            if id.wrapping_sub(first) > span {
                break;
            }
            if let Some(unsettled) = entry.take() {
                taken += 1;
                each(*id, unsettled);
            }
        }
        self.live -= taken;
        self.tidy();
        taken
    }

    /// Forget every delivery for which `keep` is false.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Unsettled) -> bool) {
        for (_, entry) in self.entries.iter_mut() {
            if entry.as_ref().is_some_and(|u| !keep(u)) {
                *entry = None;
                self.live -= 1;
            }
        }
        self.tidy();
    }

    /// Drop holes from the front; rebuild when too many are left inside.
    fn tidy(&mut self) {
        while self.entries.front().is_some_and(|(_, e)| e.is_none()) {
            self.entries.pop_front();
        }
        if self.entries.len() > 2 * self.live + HOLE_SLACK {
            self.entries.retain(|(_, e)| e.is_some());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(handle: u32, message: u64) -> Unsettled {
        Unsettled {
            handle,
            consumer: ConsumerId(u64::from(handle)),
            message,
        }
    }

    fn remove(window: &mut UnsettledDeliveries, id: u32) -> Option<Unsettled> {
        let mut taken = window.remove_range(id, id);
        assert!(taken.len() <= 1);
        taken.pop().map(|(taken_id, u)| {
            assert_eq!(taken_id, id);
            u
        })
    }

    fn ids(taken: &[(u32, Unsettled)]) -> Vec<u64> {
        taken.iter().map(|(_, u)| u.message).collect()
    }

    #[test]
    fn single_and_ranged_settlements_in_any_order() {
        let mut window = UnsettledDeliveries::default();
        for id in 0..10u32 {
            window.insert(id, delivery(0, u64::from(id)));
        }
        assert_eq!(remove(&mut window, 3).map(|u| u.message), Some(3));
        assert_eq!(remove(&mut window, 3), None);
        assert_eq!(ids(&window.remove_range(2, 5)), vec![2, 4, 5]);
        assert_eq!(window.len(), 6);
        assert_eq!(ids(&window.remove_range(0, 0)), vec![0]);
        assert_eq!(remove(&mut window, 42), None);
        assert_eq!(ids(&window.remove_range(0, 100)), vec![1, 6, 7, 8, 9]);
        assert_eq!(window.len(), 0);
        assert!(window.entries.is_empty());
    }

    #[test]
    fn ids_wrap_around_the_counter() {
        let mut window = UnsettledDeliveries::default();
        let start = u32::MAX - 2;
        for i in 0..6u32 {
            window.insert(start.wrapping_add(i), delivery(0, u64::from(i)));
        }
        assert_eq!(remove(&mut window, 1).map(|u| u.message), Some(4));
        assert_eq!(ids(&window.remove_range(u32::MAX, 0)), vec![2, 3]);
        assert_eq!(ids(&window.remove_range(start, 2)), vec![0, 1, 5]);
        assert_eq!(window.len(), 0);
    }

    #[test]
    fn a_range_starting_before_the_front_covers_the_front() {
        let mut window = UnsettledDeliveries::default();
        for id in 10..20u32 {
            window.insert(id, delivery(0, u64::from(id)));
        }
        assert_eq!(ids(&window.remove_range(5, 12)), vec![10, 11, 12]);
        assert_eq!(window.len(), 7);
    }

    #[test]
    fn retain_by_link_and_holes_stay_bounded() {
        let mut window = UnsettledDeliveries::default();
        // The oldest delivery stays unsettled while many later ones settle.
        window.insert(0, delivery(1, 0));
        for id in 1..100_000u32 {
            window.insert(id, delivery(2, u64::from(id)));
            assert!(remove(&mut window, id).is_some());
        }
        assert_eq!(window.len(), 1);
        assert!(window.entries.len() <= 2 + HOLE_SLACK + 1);
        window.insert(100_000, delivery(2, 100_000));
        window.retain(|u| u.handle != 1);
        assert_eq!(window.len(), 1);
        assert_eq!(remove(&mut window, 0), None);
        assert_eq!(
            remove(&mut window, 100_000).map(|u| u.message),
            Some(100_000)
        );
    }
}
