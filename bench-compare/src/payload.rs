//! The bench's message bodies: a small header (run id, publisher, sequence
//! number, send time) padded to the requested size, so every delivery can be
//! checked (no stale message from an earlier run, no loss, no duplicate) and
//! timed from the time its publisher meant to send it.

use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{bail, Result};

/// Bytes of the header at the start of every body.
pub const HEADER_BYTES: usize = 28;

/// Smallest body the bench can send.
pub const MIN_BODY_BYTES: usize = HEADER_BYTES;

const MAGIC: u32 = 0x5241_4d51; // "RAMQ"

/// The header of one bench message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Identifies one bin invocation: stale messages from earlier runs differ.
    pub run: u32,
    /// Which publisher sent it.
    pub publisher: u32,
    /// Per-publisher sequence number, from 0.
    pub seq: u64,
    /// Nanoseconds since [`epoch`] at which the message was (meant to be) sent.
    pub sent_ns: u64,
}

/// The process-wide time origin all stamps are relative to.
pub fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds from [`epoch`] to `at`.
pub fn ns_since_epoch(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_nanos() as u64
}

/// Nanoseconds from [`epoch`] to now.
pub fn now_ns() -> u64 {
    ns_since_epoch(Instant::now())
}

/// A run id that differs between invocations.
pub fn new_run_id() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (nanos as u32) ^ std::process::id().rotate_left(16)
}

/// Check a requested body size.
pub fn check_size(size: usize) -> Result<()> {
    if size < MIN_BODY_BYTES {
        bail!("body size {size} B is below the minimum of {MIN_BODY_BYTES} B (the bench header)");
    }
    Ok(())
}

/// A body of `size` bytes carrying `stamp`.
pub fn encode(stamp: Stamp, size: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(size.max(HEADER_BYTES));
    body.extend_from_slice(&MAGIC.to_le_bytes());
    body.extend_from_slice(&stamp.run.to_le_bytes());
    body.extend_from_slice(&stamp.publisher.to_le_bytes());
    body.extend_from_slice(&stamp.seq.to_le_bytes());
    body.extend_from_slice(&stamp.sent_ns.to_le_bytes());
    body.resize(size.max(HEADER_BYTES), b'x');
    body
}

/// Read the stamp back; `None` for a body the bench did not write.
pub fn decode(body: &[u8]) -> Option<Stamp> {
    if body.len() < HEADER_BYTES {
        return None;
    }
    let u32_at =
        |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    let u64_at = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    if u32_at(0) != MAGIC {
        return None;
    }
    Some(Stamp {
        run: u32_at(4),
        publisher: u32_at(8),
        seq: u64_at(12),
        sent_ns: u64_at(20),
    })
}

/// Which sequence numbers of one publisher arrived, to count losses and
/// duplicates without a lock on the hot path (each consumer keeps its own
/// and they are merged at the end).
#[derive(Debug, Default, Clone)]
pub struct SeqSet {
    words: Vec<u64>,
    /// Bits set in `words`, kept as they are set: `distinct` is asked for
    /// after every delivery, and a popcount over a bitmap of millions of
    /// bits each time was 90% of the drain's client CPU.
    distinct: u64,
    /// Sequence numbers seen more than once by this set.
    pub duplicates: u64,
}

impl SeqSet {
    /// Record `seq`; returns false when it was already there.
    pub fn insert(&mut self, seq: u64) -> bool {
        let word = (seq / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1u64 << (seq % 64);
        if self.words[word] & bit != 0 {
            self.duplicates += 1;
            return false;
        }
        self.words[word] |= bit;
        self.distinct += 1;
        true
    }

    /// Fold `other` in, counting numbers present in both as duplicates.
    pub fn merge(&mut self, other: &SeqSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (mine, theirs) in self.words.iter_mut().zip(&other.words) {
            self.duplicates += u64::from((*mine & *theirs).count_ones());
            self.distinct += u64::from((*theirs & !*mine).count_ones());
            *mine |= *theirs;
        }
        self.duplicates += other.duplicates;
    }

    /// Distinct sequence numbers recorded.
    pub fn distinct(&self) -> u64 {
        self.distinct
    }

    /// Sequence numbers below `sent` that never arrived.
    pub fn missing_below(&self, sent: u64) -> u64 {
        let mut present = 0u64;
        for (index, word) in self.words.iter().enumerate() {
            let base = index as u64 * 64;
            if base >= sent {
                break;
            }
            let mask = if sent - base >= 64 {
                u64::MAX
            } else {
                (1u64 << (sent - base)) - 1
            };
            present += u64::from((word & mask).count_ones());
        }
        sent - present
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips() {
        let stamp = Stamp {
            run: 7,
            publisher: 3,
            seq: 123_456_789,
            sent_ns: 42,
        };
        let body = encode(stamp, 64);
        assert_eq!(body.len(), 64);
        assert_eq!(decode(&body), Some(stamp));
        assert_eq!(decode(&body[..10]), None);
        assert_eq!(decode(&[0u8; 64]), None);
    }

    #[test]
    fn seq_set_counts_losses_and_duplicates() {
        let mut a = SeqSet::default();
        let mut b = SeqSet::default();
        for seq in 0..100 {
            if seq % 2 == 0 {
                a.insert(seq);
            } else if seq != 51 {
                b.insert(seq);
            }
        }
        assert!(!a.insert(0));
        b.insert(10);
        a.merge(&b);
        assert_eq!(a.distinct(), 99);
        assert_eq!(a.missing_below(100), 1);
        assert_eq!(a.missing_below(101), 2);
        assert_eq!(a.duplicates, 2);
    }
}
