//! The replicated part of a quorum queue: every message not yet removed,
//! by id (ids grow with the log), with its delivery-count and where its
//! body is: in memory (resident) or in this replica's segment files
//! (paged). This is what every replica applies identically; only the
//! placement of bodies differs per replica.
//!
//! Memory per paged message is one 32-byte [`Slot`] in a persistent vector
//! (`imbl::Vector`, chunks of 64 slots, no allocation per message);
//! resident bodies sit in a persistent deque beside it (`resident.rs`).
//! Cloning the index for a snapshot is O(1) and shares structure, so a
//! snapshot of a deep queue never stalls the apply path with a full copy.
//!
//! It must not know how bodies are read or written (the state machine and
//! `paging` do) or anything of consumers (the dispatcher does).

use bytes::Bytes;

use super::dead_letters::DeadLetters;
use super::id_search;
use super::resident::{ResidentBodies, Walk};
use crate::paging::Location;

/// Where a live message's body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Placement {
    /// In [`MessageIndex`]'s resident bodies.
    Resident,
    /// In this replica's segment store, at the slot's location.
    Paged,
    /// It was at the slot's location, but that segment was gone at restart
    /// (its records were settled after the snapshot that named them; the
    /// log replay removes it). Never served.
    Missing,
    /// Removed; kept until it can be dropped from the vector's front or
    /// the vector is compacted.
    Dead,
}

/// One message as every replica indexes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) id: u64,
    /// Where the body is when `Paged` or `Missing`; for a resident one only
    /// `body_bytes` is set.
    pub(crate) location: Location,
    pub(crate) delivery_count: u32,
    pub(crate) placement: Placement,
}

// What a paged message costs in memory (the budget: 32 B on average,
// never over 64 B).
const _: () = assert!(std::mem::size_of::<Slot>() <= 32);

impl Slot {
    fn live(&self) -> bool {
        self.placement != Placement::Dead
    }
}

/// Every live message of a quorum queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageIndex {
    /// In id order, live and dead.
    slots: imbl::Vector<Slot>,
    resident: ResidentBodies,
    /// Expiry times (ms since the epoch) of the live messages that have
    /// one, stamped by the leader (`Command::EnqueueExpiring`); empty, so
    /// free, for a queue without TTLs.
    expiries: imbl::OrdMap<u64, u64>,
    n_live: usize,
    n_dead: usize,
    live_bytes: u64,
    resident_bytes: u64,
    /// The dead-letter outbox and recent keys (`dead_letters.rs`).
    dead: DeadLetters,
}

/// A dead slot is dropped at once from the front; elsewhere the vector is
/// rebuilt once dead slots outnumber live ones by this much (amortized
/// O(1) per removal, at most about twice the live slots held).
const COMPACT_SLACK: usize = 4096;

impl MessageIndex {
    /// Live messages.
    pub(crate) fn len(&self) -> usize {
        self.n_live
    }

    /// Bytes of every live message.
    pub(crate) fn bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes of the bodies held in memory.
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.resident_bytes
    }

    /// The highest id ever pushed and still held (live or dead).
    pub(crate) fn last_id(&self) -> Option<u64> {
        self.slots.last().map(|s| s.id)
    }

    /// Add a message after every other. `body` is its bytes when the slot
    /// is resident (the caller copied them out of any larger buffer).
    pub(crate) fn push(&mut self, slot: Slot, body: Option<Bytes>) {
        debug_assert!(self.last_id().is_none_or(|last| last < slot.id));
        debug_assert_eq!(slot.placement == Placement::Resident, body.is_some());
        if let Some(body) = body {
            self.resident_bytes += body.len() as u64;
            self.resident.push(slot.id, body);
        }
        self.live_bytes += u64::from(slot.location.body_bytes);
        self.n_live += 1;
        self.slots.push_back(slot);
    }

    fn position(&self, id: u64) -> Option<usize> {
        // Consumers settle mostly in queue order, and dead slots are
        // dropped from the front at once, so the slot sought is most often
        // the first, which `position` looks at before searching.
        id_search::position(&self.slots, id, |s| s.id)
    }

    /// The live slot of message `id`.
    pub(crate) fn get(&self, id: u64) -> Option<Slot> {
        let slot = *self.slots.get(self.position(id)?)?;
        slot.live().then_some(slot)
    }

    /// Whether message `id` is live.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// When message `id` expires (0: never).
    pub(crate) fn expires_at(&self, id: u64) -> u64 {
        if self.expiries.is_empty() {
            return 0;
        }
        self.expiries.get(&id).copied().unwrap_or(0)
    }

    /// Set live message `id`'s expiry (0: never).
    pub(crate) fn set_expiry(&mut self, id: u64, expires_at: u64) {
        if expires_at != 0 && self.contains(id) {
            self.expiries.insert(id, expires_at);
        }
    }

    /// Whether any live message has an expiry.
    pub(crate) fn has_expiries(&self) -> bool {
        !self.expiries.is_empty()
    }

    /// The body of a resident message.
    pub(crate) fn resident_body(&self, id: u64) -> Option<Bytes> {
        self.resident.get(id).cloned()
    }

    /// Remove message `id`; its slot and, if resident, its body.
    pub(crate) fn remove(&mut self, id: u64) -> Option<(Slot, Option<Bytes>)> {
        let position = self.position(id)?;
        let slot = self.slots.get_mut(position)?;
        if !slot.live() {
            return None;
        }
        let removed = *slot;
        slot.placement = Placement::Dead;
        self.n_live -= 1;
        self.n_dead += 1;
        let body = if removed.placement == Placement::Resident {
            self.resident.remove(id)
        } else {
            None
        };
        if let Some(body) = &body {
            self.resident_bytes -= body.len() as u64;
        }
        if !self.expiries.is_empty() {
            self.expiries.remove(&id);
        }
        self.live_bytes -= u64::from(removed.location.body_bytes);
        self.drop_dead();
        Some((removed, body))
    }

    /// One more failed delivery of message `id`; its count after it.
    pub(crate) fn fail(&mut self, id: u64) -> Option<u32> {
        let position = self.position(id)?;
        let slot = self.slots.get_mut(position)?;
        if !slot.live() {
            return None;
        }
        slot.delivery_count = slot.delivery_count.saturating_add(1);
        Some(slot.delivery_count)
    }

    /// Mark a paged message's body as lost (its segment was gone).
    pub(crate) fn set_missing(&mut self, id: u64) {
        if let Some(position) = self.position(id) {
            if let Some(slot) = self.slots.get_mut(position) {
                if slot.placement == Placement::Paged {
                    slot.placement = Placement::Missing;
                }
            }
        }
    }

    /// Point paged message `id` at `to` if it is at `from` (compaction
    /// moved its record).
    pub(crate) fn relocate(&mut self, id: u64, from: Location, to: Location) {
        if let Some(position) = self.position(id) {
            if let Some(slot) = self.slots.get_mut(position) {
                if slot.placement == Placement::Paged && slot.location == from {
                    slot.location = to;
                }
            }
        }
    }

    /// The dead-letter outbox and recent keys.
    pub(crate) fn dead_letters(&self) -> &DeadLetters {
        &self.dead
    }

    /// The same, to change.
    pub(crate) fn dead_letters_mut(&mut self) -> &mut DeadLetters {
        &mut self.dead
    }

    /// Live slots after `cursor` (from the start without one), in id
    /// order, at most `max`, each with its body if resident, leaving out
    /// the dead-letter outbox (its messages are never served again).
    pub(crate) fn next_after(&self, cursor: Option<u64>, max: usize) -> Vec<(Slot, Option<Bytes>)> {
        let start = match cursor {
            None => 0,
            Some(c) => match id_search::search(&self.slots, c, |s| s.id) {
                Ok(i) => i + 1,
                Err(i) => i,
            },
        };
        let mut out = Vec::new();
        let mut focus = self.slots.focus();
        let mut bodies = self.resident.walk(cursor);
        let mut i = start;
        while i < self.slots.len() && out.len() < max {
            if let Some(slot) = focus.get(i) {
                if slot.live() && !self.dead.in_outbox(slot.id) {
                    out.push((*slot, body_of(slot, &mut bodies)));
                }
            }
            i += 1;
        }
        out
    }

    /// Every live slot, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.slots.iter().filter(|s| s.live()).copied()
    }

    /// Every live slot, in id order, with its body if resident.
    pub(crate) fn iter_with_bodies(&self) -> impl Iterator<Item = (Slot, Option<Bytes>)> + '_ {
        let mut bodies = self.resident.walk(None);
        self.iter().map(move |slot| {
            let body = body_of(&slot, &mut bodies);
            (slot, body)
        })
    }

    /// Drop dead slots from the front; rebuild when too many remain.
    fn drop_dead(&mut self) {
        while self.slots.front().is_some_and(|s| !s.live()) {
            self.slots.pop_front();
            self.n_dead -= 1;
        }
        if self.n_dead > self.n_live + COMPACT_SLACK {
            self.slots.retain(|s| s.live());
            self.n_dead = 0;
        }
    }
}

/// A resident slot's body from a walk over the resident bodies.
fn body_of(slot: &Slot, bodies: &mut Walk<'_>) -> Option<Bytes> {
    if slot.placement == Placement::Resident {
        bodies.take(slot.id)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paged(id: u64, ordinal: u32) -> Slot {
        Slot {
            id,
            location: Location {
                segment: 0,
                offset: ordinal * 20,
                body_bytes: 4,
                ordinal,
            },
            delivery_count: 0,
            placement: Placement::Paged,
        }
    }

    fn resident(id: u64) -> Slot {
        Slot {
            id,
            location: Location {
                segment: 0,
                offset: 0,
                body_bytes: 3,
                ordinal: 0,
            },
            delivery_count: 0,
            placement: Placement::Resident,
        }
    }

    #[test]
    fn remove_fail_and_order() {
        let mut index = MessageIndex::default();
        for id in 1..=5u64 {
            if id % 2 == 0 {
                index.push(resident(id), Some(Bytes::from_static(b"abc")));
            } else {
                index.push(paged(id, id as u32), None);
            }
        }
        assert_eq!(index.len(), 5);
        assert_eq!(index.bytes(), 3 * 4 + 2 * 3);
        assert_eq!(index.resident_bytes(), 6);
        let (slot, body) = index.remove(2).unwrap();
        assert_eq!(slot.id, 2);
        assert_eq!(body.as_deref(), Some(&b"abc"[..]));
        assert!(index.remove(2).is_none());
        assert_eq!(index.fail(3), Some(1));
        assert_eq!(index.fail(3), Some(2));
        assert_eq!(index.fail(2), None);
        let ids: Vec<(u64, u32)> = index.iter().map(|s| (s.id, s.delivery_count)).collect();
        assert_eq!(ids, vec![(1, 0), (3, 2), (4, 0), (5, 0)]);
        assert_eq!(index.bytes(), 3 * 4 + 3);
        let next: Vec<u64> = index
            .next_after(Some(1), 2)
            .iter()
            .map(|(s, _)| s.id)
            .collect();
        assert_eq!(next, vec![3, 4]);
        let next: Vec<u64> = index
            .next_after(Some(2), 10)
            .iter()
            .map(|(s, _)| s.id)
            .collect();
        assert_eq!(next, vec![3, 4, 5]);
        // Resident bodies come with their slots, paged ones do not.
        let abc = Some(Bytes::from_static(b"abc"));
        let bodies: Vec<(u64, Option<Bytes>)> = index
            .next_after(Some(3), 10)
            .into_iter()
            .map(|(s, b)| (s.id, b))
            .collect();
        assert_eq!(bodies, vec![(4, abc.clone()), (5, None)]);
        let bodies: Vec<(u64, Option<Bytes>)> =
            index.iter_with_bodies().map(|(s, b)| (s.id, b)).collect();
        assert_eq!(bodies, vec![(1, None), (3, None), (4, abc), (5, None)]);
    }

    #[test]
    fn a_clone_does_not_see_later_changes() {
        let mut index = MessageIndex::default();
        for id in 1..=1000u64 {
            index.push(paged(id, id as u32), None);
        }
        let snapshot = index.clone();
        for id in 1..=500u64 {
            index.remove(id);
        }
        assert_eq!(snapshot.len(), 1000);
        index.set_expiry(600, 42);
        index.set_expiry(1, 42);
        assert_eq!((index.expires_at(600), index.expires_at(1)), (42, 0));
        assert!(!snapshot.has_expiries());
        index.remove(600);
        assert!(!index.has_expiries());
        assert_eq!(index.len(), 499);
        assert_eq!(index.iter().next().map(|s| s.id), Some(501));
    }

    #[test]
    fn dead_slots_in_the_middle_are_compacted_away() {
        let mut index = MessageIndex::default();
        let n = 3 * COMPACT_SLACK as u64;
        for id in 1..=n {
            index.push(paged(id, id as u32), None);
        }
        // The head stays; everything behind it is consumed.
        for id in 2..=n {
            index.remove(id);
        }
        assert_eq!(index.len(), 1);
        assert!(index.slots.len() <= 1 + COMPACT_SLACK + 1);
        assert!(index.contains(1));
        assert!(!index.contains(n));
    }
}
