//! The bodies a quorum-queue replica holds in memory, by message id: a
//! persistent deque in id order, since ids only grow and consumers settle
//! mostly in queue order.
//!
//! A new body goes at the back and the oldest leaves from the front, each
//! in a few instructions; a body taken from the middle leaves a hole that
//! goes with the front or, once holes outnumber bodies by more than a
//! slack, with a rebuild (amortized O(1) per removal). Reads in id order
//! (the dispatcher's window, a snapshot) walk the deque alongside the
//! slots; a single body in the middle is found by a search over the
//! deque's chunks (`id_search.rs`). The persistent ordered map this
//! replaces walked and copied a path of tree nodes for every insert and
//! every removal, about 1.5k instructions per message, a tenth of a
//! pipelined publish; a persistent hash map would have been cheaper per
//! operation but holds a full 32-slot node for every few bodies of a deep
//! queue. A clone (for a snapshot) stays O(1) and shares structure.
//!
//! It must not know what a slot, a segment or a consumer is: `index.rs`
//! decides which bodies are resident.

use bytes::Bytes;

use super::id_search;

/// Holes tolerated beyond the bodies held before a rebuild.
const HOLES_SLACK: usize = 4096;

/// Resident bodies in id order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResidentBodies {
    /// In id order; `None` is a body taken from the middle.
    entries: imbl::Vector<(u64, Option<Bytes>)>,
    holes: usize,
}

impl ResidentBodies {
    /// Bodies held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len() - self.holes
    }

    /// Add the body of message `id`, newer than every body held.
    pub(crate) fn push(&mut self, id: u64, body: Bytes) {
        debug_assert!(self.entries.back().is_none_or(|(last, _)| *last < id));
        self.entries.push_back((id, Some(body)));
    }

    /// Where message `id` is, if it has an entry.
    fn position(&self, id: u64) -> Option<usize> {
        id_search::position(&self.entries, id, |(at, _)| *at)
    }

    /// Where message `id` is, or where it would go.
    fn search(&self, id: u64) -> Result<usize, usize> {
        id_search::search(&self.entries, id, |(at, _)| *at)
    }

    /// The body of message `id`, if held.
    pub(crate) fn get(&self, id: u64) -> Option<&Bytes> {
        self.entries.get(self.position(id)?)?.1.as_ref()
    }

    /// Take the body of message `id`, if held.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Bytes> {
        let position = self.position(id)?;
        if position == 0 {
            let (_, body) = self.entries.pop_front()?;
            while self.entries.front().is_some_and(|(_, b)| b.is_none()) {
                self.entries.pop_front();
                self.holes -= 1;
            }
            return body;
        }
        let body = self.entries.get_mut(position)?.1.take()?;
        self.holes += 1;
        if self.holes > self.entries.len() - self.holes + HOLES_SLACK {
            self.entries.retain(|(_, b)| b.is_some());
            self.holes = 0;
        }
        Some(body)
    }

    /// A reader of bodies in id order, from the first id at or after
    /// `from` (from the oldest without one).
    pub(crate) fn walk(&self, from: Option<u64>) -> Walk<'_> {
        let next = match from.map(|id| self.search(id)) {
            None => 0,
            Some(Ok(i) | Err(i)) => i,
        };
        Walk {
            focus: self.entries.focus(),
            next,
            len: self.entries.len(),
        }
    }
}

/// Bodies in id order (`ResidentBodies::walk`): each `take` moves forward
/// in the same chunk most of the time, so a window or a snapshot costs a
/// few instructions per body.
pub(crate) struct Walk<'a> {
    focus: imbl::vector::Focus<'a, (u64, Option<Bytes>), imbl::shared_ptr::DefaultSharedPtr>,
    next: usize,
    len: usize,
}

impl Walk<'_> {
    /// The body of message `id`, if held; ids asked for must grow.
    pub(crate) fn take(&mut self, id: u64) -> Option<Bytes> {
        while self.next < self.len {
            let (at, body) = self.focus.get(self.next)?;
            if *at > id {
                return None;
            }
            self.next += 1;
            if *at == id {
                return body.clone();
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: u64) -> Bytes {
        Bytes::from(id.to_be_bytes().to_vec())
    }

    #[test]
    fn bodies_come_back_by_id_from_front_and_middle() {
        let mut bodies = ResidentBodies::default();
        for id in (10..20).step_by(2) {
            bodies.push(id, body(id));
        }
        assert_eq!(bodies.get(12), Some(&body(12)));
        assert_eq!(bodies.get(13), None);
        assert_eq!(bodies.remove(14), Some(body(14)));
        assert_eq!(bodies.remove(14), None);
        assert_eq!(bodies.get(14), None);
        assert_eq!(bodies.remove(10), Some(body(10)));
        // The front goes, and the hole behind 12 with it once 12 goes.
        assert_eq!(bodies.remove(12), Some(body(12)));
        assert_eq!((bodies.len(), bodies.holes), (2, 0));
        assert_eq!(bodies.entries.front().map(|(id, _)| *id), Some(16));
        assert_eq!(bodies.remove(9), None);
        assert_eq!(bodies.remove(99), None);
    }

    #[test]
    fn bodies_deep_in_the_deque_are_found_and_walked_in_order() {
        let mut bodies = ResidentBodies::default();
        // Sparse ids, over many chunks.
        for id in (1..=1000u64).map(|i| i * 3) {
            bodies.push(id, body(id));
        }
        for id in [3, 195, 198, 300, 1500, 2997, 3000] {
            assert_eq!(bodies.get(id), Some(&body(id)), "{id}");
        }
        for id in [1, 196, 301, 3001] {
            assert_eq!(bodies.get(id), None, "{id}");
        }
        assert_eq!(bodies.remove(1500), Some(body(1500)));
        assert_eq!(bodies.get(1500), None);
        let mut walk = bodies.walk(Some(1496));
        assert_eq!(walk.take(1498), None);
        assert_eq!(walk.take(1500), None);
        assert_eq!(walk.take(1503), Some(body(1503)));
        assert_eq!(walk.take(2997), Some(body(2997)));
        assert_eq!(walk.take(3003), None);
        let mut walk = bodies.walk(None);
        assert_eq!(walk.take(3), Some(body(3)));
        assert_eq!(walk.take(6), Some(body(6)));
    }

    #[test]
    fn holes_behind_a_held_head_are_rebuilt_away() {
        let mut bodies = ResidentBodies::default();
        let n = 3 * HOLES_SLACK as u64;
        for id in 1..=n {
            bodies.push(id, body(id));
        }
        // The head stays; everything behind it is consumed.
        for id in 2..=n {
            assert_eq!(bodies.remove(id), Some(body(id)));
        }
        assert_eq!(bodies.len(), 1);
        assert!(bodies.entries.len() <= 1 + HOLES_SLACK + 1);
        assert_eq!(bodies.get(1), Some(&body(1)));
        bodies.push(n + 1, body(n + 1));
        assert_eq!(bodies.get(n + 1), Some(&body(n + 1)));
    }

    #[test]
    fn a_clone_does_not_see_later_changes() {
        let mut bodies = ResidentBodies::default();
        for id in 1..=1000u64 {
            bodies.push(id, body(id));
        }
        let snapshot = bodies.clone();
        for id in 1..=500u64 {
            bodies.remove(id);
        }
        bodies.remove(700);
        assert_eq!(snapshot.len(), 1000);
        assert_eq!(snapshot.get(1), Some(&body(1)));
        assert_eq!(snapshot.get(700), Some(&body(700)));
        assert_eq!(bodies.get(700), None);
        assert_eq!(bodies.len(), 499);
    }
}
