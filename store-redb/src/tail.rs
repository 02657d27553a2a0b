//! The in-memory tail of one group's log: entries appended but not yet known
//! to be durable.
//!
//! `append` must make entries readable before the group commit lands, so
//! they are kept here, each tagged with the write sequence number of the
//! append that carried it. When the writer thread reports that sequence
//! number durable, [`Tail::release_through`] drops them; reads then find
//! them on disk.
//!
//! Invariants (checked by `debug_assert!`):
//! - indexes are contiguous and increasing, so the tail is one suffix of the
//!   group's log;
//! - write sequence numbers are non-decreasing from front to back. A
//!   truncate removes the back before newer appends are pushed, and a purge
//!   removes the front, so this holds, and releasing a sequence number
//!   always drops a prefix.
//!
//! The tail is owned by its group's `GroupState` and only touched under that
//! group's mutex.

use std::collections::VecDeque;

struct TailEntry<E> {
    index: u64,
    write_seq: u64,
    entry: E,
}

/// Entries of one group that are readable but not yet durable.
pub(crate) struct Tail<E> {
    entries: VecDeque<TailEntry<E>>,
}

impl<E: Clone> Tail<E> {
    pub(crate) fn new() -> Self {
        Tail {
            entries: VecDeque::new(),
        }
    }

    /// Index of the first entry held, if any.
    pub(crate) fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|e| e.index)
    }

    /// Number of entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds `entry` at `index`, written by the request `write_seq`.
    pub(crate) fn push(&mut self, index: u64, write_seq: u64, entry: E) {
        if let Some(back) = self.entries.back() {
            debug_assert_eq!(back.index + 1, index, "tail indexes are contiguous");
            debug_assert!(back.write_seq <= write_seq, "tail sequence is ordered");
        }
        self.entries.push_back(TailEntry {
            index,
            write_seq,
            entry,
        });
    }

    /// Removes every entry at `index` or later (a truncate).
    pub(crate) fn truncate_from(&mut self, index: u64) {
        while self.entries.back().is_some_and(|e| e.index >= index) {
            self.entries.pop_back();
        }
    }

    /// Removes every entry at `index` or earlier (a purge).
    pub(crate) fn purge_through(&mut self, index: u64) {
        while self.entries.front().is_some_and(|e| e.index <= index) {
            self.entries.pop_front();
        }
    }

    /// Drops the entries written by requests up to and including
    /// `write_seq`: they are durable now.
    pub(crate) fn release_through(&mut self, write_seq: u64) {
        while self
            .entries
            .front()
            .is_some_and(|e| e.write_seq <= write_seq)
        {
            self.entries.pop_front();
        }
    }

    /// The entry at `index`, if held.
    pub(crate) fn get(&self, index: u64) -> Option<&E> {
        let first = self.first_index()?;
        let offset = usize::try_from(index.checked_sub(first)?).ok()?;
        self.entries.get(offset).map(|e| &e.entry)
    }

    /// Clones of the entries with index in `start..end` that are held.
    pub(crate) fn clone_range(&self, start: u64, end: u64) -> Vec<E> {
        self.entries
            .iter()
            .skip_while(|e| e.index < start)
            .take_while(|e| e.index < end)
            .map(|e| e.entry.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes(t: &Tail<u64>) -> Vec<u64> {
        t.clone_range(0, u64::MAX)
    }

    #[test]
    fn release_drops_only_the_durable_prefix() {
        let mut t = Tail::new();
        for i in 5..10 {
            t.push(i, i / 2, i);
        }
        t.release_through(3);
        assert_eq!(indexes(&t), vec![8, 9]);
        assert_eq!(t.first_index(), Some(8));
        assert_eq!(t.get(9), Some(&9));
        assert_eq!(t.get(7), None);
    }

    #[test]
    fn truncate_then_append_keeps_order_and_release_spares_the_new_entries() {
        let mut t = Tail::new();
        for i in 1..=5 {
            t.push(i, 1, i);
        }
        t.truncate_from(3);
        t.push(3, 2, 30);
        t.push(4, 2, 40);
        assert_eq!(indexes(&t), vec![1, 2, 30, 40]);
        t.release_through(1);
        assert_eq!(indexes(&t), vec![30, 40]);
        t.release_through(2);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn purge_and_ranges() {
        let mut t = Tail::new();
        for i in 0..6 {
            t.push(i, 0, i);
        }
        t.purge_through(2);
        assert_eq!(t.clone_range(0, 5), vec![3, 4]);
        assert_eq!(t.clone_range(4, 100), vec![4, 5]);
        t.purge_through(100);
        assert_eq!(t.first_index(), None);
    }
}
