//! The in-memory tail of one group's log: entries appended but not yet known
//! to be durable.
//!
//! `append` must make entries readable before the group commit lands, so
//! they are kept here, each tagged with the write sequence number of the
//! append that carried it. When the writer thread reports that append
//! durable, [`Tail::release_through`] drops them; reads then find them on
//! disk. Where the tail and the disk both hold an index, the tail is newer
//! and wins.
//!
//! Indexes need not be contiguous: openraft asks for a log without holes,
//! but its own conformance suite appends with gaps, so the tail (like the
//! entries table) behaves as a map from index to entry.
//!
//! The tail is owned by its group's `GroupState` and only touched under that
//! group's mutex. With the append journal it holds every append of the
//! group since the journal's last fold (thousands of entries for a busy
//! group), and each of those appends releases its own: so a release must
//! not scan the whole tail. Appends come at the end of the log (after a
//! truncate, at its cut), so the tail's write sequence numbers rise with
//! the index and a release takes entries off the front only; a push into
//! the middle (the conformance suite's gaps) marks the tail unordered and
//! releases scan it until it is empty again.

use std::collections::BTreeMap;

struct TailEntry<E> {
    write_seq: u64,
    entry: E,
}

/// Entries of one group that are readable but not yet durable.
pub(crate) struct Tail<E> {
    entries: BTreeMap<u64, TailEntry<E>>,
    /// Whether an entry was pushed below another: write sequence numbers
    /// may then not rise with the index.
    unordered: bool,
}

impl<E: Clone> Tail<E> {
    pub(crate) fn new() -> Self {
        Tail {
            entries: BTreeMap::new(),
            unordered: false,
        }
    }

    /// Number of entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds (or replaces) the entry at `index`, written by the append
    /// `write_seq`.
    pub(crate) fn push(&mut self, index: u64, write_seq: u64, entry: E) {
        if self
            .entries
            .last_key_value()
            .is_some_and(|(last, _)| *last >= index)
        {
            self.unordered = true;
        }
        self.entries.insert(index, TailEntry { write_seq, entry });
    }

    /// Removes every entry at `index` or later (a truncate).
    pub(crate) fn truncate_from(&mut self, index: u64) {
        drop(self.entries.split_off(&index));
        self.shed_if_empty();
    }

    /// Removes every entry at `index` or earlier (a purge).
    pub(crate) fn purge_through(&mut self, index: u64) {
        self.entries = match index.checked_add(1) {
            Some(first_kept) => self.entries.split_off(&first_kept),
            None => BTreeMap::new(),
        };
        self.shed_if_empty();
    }

    /// Drops the entries written by appends up to and including
    /// `write_seq`: they are durable now.
    pub(crate) fn release_through(&mut self, write_seq: u64) {
        if self.unordered {
            self.entries.retain(|_, e| e.write_seq > write_seq);
        } else {
            while let Some(first) = self.entries.first_entry() {
                if first.get().write_seq > write_seq {
                    break;
                }
                first.remove();
            }
        }
        self.shed_if_empty();
    }

    /// An emptied map keeps its root node (room for 11 entries, ~1.2 KiB
    /// with openraft's entries), and an idle group's tail is empty once
    /// the journal folds: a fresh map holds no memory until the next push.
    fn shed_if_empty(&mut self) {
        if self.entries.is_empty() {
            self.entries = BTreeMap::new();
            self.unordered = false;
        }
    }

    /// The highest-indexed entry below `index`, if any.
    pub(crate) fn last_before(&self, index: u64) -> Option<&E> {
        self.entries
            .range(..index)
            .next_back()
            .map(|(_, e)| &e.entry)
    }

    /// Clones of the held entries with index in `start..end`, with their
    /// indexes, in index order.
    pub(crate) fn clone_range(&self, start: u64, end: u64) -> Vec<(u64, E)> {
        if start >= end {
            return Vec::new();
        }
        self.entries
            .range(start..end)
            .map(|(index, e)| (*index, e.entry.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &Tail<u64>) -> Vec<u64> {
        t.clone_range(0, u64::MAX)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn release_drops_only_durable_appends() {
        let mut t = Tail::new();
        for i in 5..10 {
            t.push(i, i / 2, i);
        }
        t.release_through(3);
        assert_eq!(values(&t), vec![8, 9]);
    }

    #[test]
    fn truncate_then_append_and_release_spares_the_new_entries() {
        let mut t = Tail::new();
        for i in 1..=5 {
            t.push(i, 1, i);
        }
        t.truncate_from(3);
        t.push(3, 2, 30);
        t.push(4, 2, 40);
        assert_eq!(values(&t), vec![1, 2, 30, 40]);
        assert_eq!(t.last_before(3), Some(&2));
        t.release_through(1);
        assert_eq!(values(&t), vec![30, 40]);
        t.release_through(2);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn release_after_a_push_into_the_middle_still_drops_every_durable_entry() {
        let mut t = Tail::new();
        t.push(5, 1, 5);
        t.push(9, 2, 9);
        // Below the last index, with a later write: ordered no more.
        t.push(7, 3, 7);
        t.release_through(2);
        assert_eq!(values(&t), vec![7]);
        t.release_through(3);
        assert_eq!(t.len(), 0);
        // Empty again: ordered, and releases from the front.
        t.push(1, 4, 1);
        t.push(2, 5, 2);
        t.release_through(4);
        assert_eq!(values(&t), vec![2]);
    }

    #[test]
    fn purge_and_ranges() {
        let mut t = Tail::new();
        for i in 0..6 {
            t.push(i, 0, i);
        }
        t.purge_through(2);
        assert_eq!(t.clone_range(0, 5), vec![(3, 3), (4, 4)]);
        assert_eq!(t.clone_range(4, 100), vec![(4, 4), (5, 5)]);
        assert_eq!(t.clone_range(4, 4), vec![]);
        t.purge_through(u64::MAX);
        assert_eq!(t.len(), 0);
    }
}
