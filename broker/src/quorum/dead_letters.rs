//! The replicated dead-letter state of a quorum queue, kept in its
//! [`MessageIndex`](super::index::MessageIndex) so that snapshots carry it:
//!
//! - the **outbox**: messages this queue dead-lettered
//!   (`Command::DeadLetter`) whose copy the dead-letter queue has not yet
//!   confirmed. They stay in the index (body included) and are never fed
//!   to consumers; the leader sends them (`dead_letter_outbox.rs`) and
//!   `Command::DeadLettered` removes them once the dead-letter queue
//!   committed them. A new leader sends its whole outbox again.
//! - the **recent keys**: the dead-letter keys of the copies this queue
//!   took in as a dead-letter queue. A copy whose key is among them is a
//!   second send of one dead-lettering (its source's leader changed before
//!   it recorded the confirm) and is not enqueued again. At most
//!   [`RECENT_KEYS_MAX`] keys, the oldest forgotten first.
//!
//! Why the bound is safe: a key can come back only while its source still
//! has the message in its outbox, i.e. between the first send and the
//! commit of the source's `DeadLettered`, which the source proposes as
//! soon as the confirm arrives; a second send happens only after a
//! leader change of the source (or a lost confirm, retried after
//! `RESEND_AFTER` (`dead_letter_outbox.rs`)). For a duplicate to slip
//! through, more than `RECENT_KEYS_MAX` other dead letters would have to
//! reach this queue in that window (65,536: at 10,000 dead letters a
//! second, over 6 s of source fail-over).
//!
//! A key is the source's random 64-bit salt of the `DeadLetter` entry
//! (chosen by its leader, so replicated, and unguessable by clients) and
//! the message id: unique across sources and across a queue deleted and
//! made again. It knows nothing of consumers or of how copies are sent.

use crate::queue::dead_letter::DeathReason;

/// Keys a dead-letter queue remembers (16 bytes each, plus the set).
pub(crate) const RECENT_KEYS_MAX: usize = 65_536;

/// One message in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outgoing {
    /// Why it was dead-lettered.
    pub(crate) reason: DeathReason,
    /// The key its copy carries.
    pub(crate) key: u128,
}

/// The outbox and the recent keys (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeadLetters {
    outbox: imbl::OrdMap<u64, Outgoing>,
    keys: imbl::Vector<u128>,
    key_set: imbl::OrdSet<u128>,
}

/// The key of message `id` dead-lettered by an entry with `salt`.
pub(crate) fn key(salt: u64, id: u64) -> u128 {
    (u128::from(salt) << 64) | u128::from(id)
}

fn reason_code(reason: DeathReason) -> u8 {
    match reason {
        DeathReason::Rejected => 1,
        DeathReason::Expired => 2,
        DeathReason::Maxlen => 3,
        DeathReason::DeliveryLimit => 4,
    }
}

fn reason_of(code: u8) -> Option<DeathReason> {
    Some(match code {
        1 => DeathReason::Rejected,
        2 => DeathReason::Expired,
        3 => DeathReason::Maxlen,
        4 => DeathReason::DeliveryLimit,
        _ => return None,
    })
}

impl DeadLetters {
    /// Whether message `id` waits in the outbox.
    pub(crate) fn in_outbox(&self, id: u64) -> bool {
        !self.outbox.is_empty() && self.outbox.contains_key(&id)
    }

    /// Messages in the outbox.
    pub(crate) fn outbox_len(&self) -> usize {
        self.outbox.len()
    }

    /// Put message `id` in the outbox (once).
    pub(crate) fn add(&mut self, id: u64, outgoing: Outgoing) {
        self.outbox.entry(id).or_insert(outgoing);
    }

    /// Take message `id` out of the outbox; whether it was there.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        self.outbox.remove(&id).is_some()
    }

    /// The outbox, in id order.
    pub(crate) fn outbox(&self) -> impl Iterator<Item = (u64, Outgoing)> + '_ {
        self.outbox.iter().map(|(id, o)| (*id, *o))
    }

    /// Remember `key`; false if it was known (a second send).
    pub(crate) fn first_time(&mut self, key: u128) -> bool {
        if self.key_set.contains(&key) {
            return false;
        }
        self.key_set.insert(key);
        self.keys.push_back(key);
        while self.keys.len() > RECENT_KEYS_MAX {
            if let Some(old) = self.keys.pop_front() {
                self.key_set.remove(&old);
            }
        }
        true
    }

    /// Whether there is nothing to record (snapshots then leave the
    /// section out).
    pub(crate) fn is_empty(&self) -> bool {
        self.outbox.is_empty() && self.keys.is_empty()
    }

    /// The bytes snapshots carry: outbox count u64 LE, per message id u64
    /// LE, reason u8, key u128 LE; then key count u64 LE and the keys,
    /// oldest first, u128 LE each.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.outbox.len() * 25 + self.keys.len() * 16);
        out.extend_from_slice(&(self.outbox.len() as u64).to_le_bytes());
        for (id, outgoing) in self.outbox.iter() {
            out.extend_from_slice(&id.to_le_bytes());
            out.push(reason_code(outgoing.reason));
            out.extend_from_slice(&outgoing.key.to_le_bytes());
        }
        out.extend_from_slice(&(self.keys.len() as u64).to_le_bytes());
        for key in self.keys.iter() {
            out.extend_from_slice(&key.to_le_bytes());
        }
        out
    }

    /// Read what [`DeadLetters::encode`] wrote; `None` if it is not that
    /// (counts are checked against the bytes present before anything is
    /// built from them).
    pub(crate) fn decode(bytes: &[u8]) -> Option<DeadLetters> {
        let mut cursor = Cursor { bytes, at: 0 };
        let mut dead = DeadLetters::default();
        let n_outbox = cursor.u64()?;
        if n_outbox.checked_mul(25)? > bytes.len() as u64 {
            return None;
        }
        for _ in 0..n_outbox {
            let id = cursor.u64()?;
            let reason = reason_of(*cursor.take(1)?.first()?)?;
            let key = cursor.u128()?;
            dead.outbox.insert(id, Outgoing { reason, key });
        }
        let n_keys = cursor.u64()?;
        if n_keys.checked_mul(16)? > bytes.len() as u64 {
            return None;
        }
        for _ in 0..n_keys {
            dead.first_time(cursor.u128()?);
        }
        (cursor.at == bytes.len()).then_some(dead)
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u64(&mut self) -> Option<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(a))
    }

    fn u128(&mut self) -> Option<u128> {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.take(16)?);
        Some(u128::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut dead = DeadLetters::default();
        dead.add(
            7,
            Outgoing {
                reason: DeathReason::Rejected,
                key: key(9, 7),
            },
        );
        assert!(dead.first_time(5));
        assert!(!dead.first_time(5));
        assert!(dead.first_time(6));
        let bytes = dead.encode();
        assert_eq!(DeadLetters::decode(&bytes), Some(dead.clone()));
        for cut in 0..bytes.len() {
            assert!(DeadLetters::decode(&bytes[..cut]).is_none());
        }
        let mut bad = bytes.clone();
        bad[16] = 9; // the reason code
        assert!(DeadLetters::decode(&bad).is_none());
        assert!(dead.in_outbox(7));
        assert!(dead.remove(7));
        assert!(!dead.in_outbox(7));
    }

    #[test]
    fn keys_are_bounded_oldest_first() {
        let mut dead = DeadLetters::default();
        for k in 0..(RECENT_KEYS_MAX as u128 + 10) {
            assert!(dead.first_time(k));
        }
        assert_eq!(dead.keys.len(), RECENT_KEYS_MAX);
        assert!(dead.first_time(0), "the oldest was forgotten");
        assert!(!dead.first_time(RECENT_KEYS_MAX as u128 + 9));
    }
}
