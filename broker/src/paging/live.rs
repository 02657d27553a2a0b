//! `LiveSet`: which records of one segment are still live, as a bitmap over
//! the records' ordinals (the n-th record written into the segment), plus
//! the live count and live bytes that compaction and deletion decide by.
//!
//! One bit per record ever written into the segment, whether live or not:
//! a 64 MiB segment of 1 KiB records costs 8 KiB. Knows nothing of files.

/// The live records of one segment.
#[derive(Debug, Default, Clone)]
pub(super) struct LiveSet {
    words: Vec<u64>,
    n_live: u32,
    live_bytes: u64,
}

impl LiveSet {
    /// Marks ordinal live with `record_bytes` on disk; false if it already was.
    pub(super) fn insert(&mut self, ordinal: u32, record_bytes: u64) -> bool {
        let (word, bit) = Self::position(ordinal);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let slot = &mut self.words[word];
        if *slot & bit != 0 {
            return false;
        }
        *slot |= bit;
        self.n_live += 1;
        self.live_bytes += record_bytes;
        true
    }

    /// Marks ordinal dead; false if it was not live.
    pub(super) fn remove(&mut self, ordinal: u32, record_bytes: u64) -> bool {
        let (word, bit) = Self::position(ordinal);
        let Some(slot) = self.words.get_mut(word) else {
            return false;
        };
        if *slot & bit == 0 {
            return false;
        }
        *slot &= !bit;
        self.n_live -= 1;
        debug_assert!(self.live_bytes >= record_bytes, "live bytes underflow");
        self.live_bytes = self.live_bytes.saturating_sub(record_bytes);
        true
    }

    /// Whether ordinal is live.
    pub(super) fn contains(&self, ordinal: u32) -> bool {
        let (word, bit) = Self::position(ordinal);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Live records.
    pub(super) fn n_live(&self) -> u32 {
        self.n_live
    }

    /// Bytes on disk (headers included) of the live records.
    pub(super) fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// The highest live ordinal, if any.
    pub(super) fn last(&self) -> Option<u32> {
        let (index, word) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        let bit = 63 - word.leading_zeros();
        u32::try_from(index * 64).ok().map(|base| base + bit)
    }

    fn position(ordinal: u32) -> (usize, u64) {
        (ordinal as usize / 64, 1u64 << (ordinal % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_counts_and_duplicates() {
        let mut set = LiveSet::default();
        assert!(set.insert(0, 10));
        assert!(set.insert(130, 20));
        assert!(!set.insert(130, 20), "second insert of a live ordinal");
        assert_eq!((set.n_live(), set.live_bytes()), (2, 30));
        assert!(set.contains(130) && !set.contains(129));
        assert_eq!(set.last(), Some(130));
        assert!(set.remove(130, 20));
        assert!(!set.remove(130, 20), "double release");
        assert!(!set.remove(5000, 1), "ordinal never seen");
        assert_eq!(
            (set.n_live(), set.live_bytes(), set.last()),
            (1, 10, Some(0))
        );
        assert!(set.remove(0, 10));
        assert_eq!(set.last(), None);
    }
}
