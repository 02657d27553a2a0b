//! Giving a collection's memory back once it is empty, on a cold path.
//!
//! Why: a hash map or a deque keeps its table after its last entry goes.
//! A queue used once and then left idle (a consumer attached, took its
//! messages and detached) kept ~0.6 KiB that way in every replica that
//! served it, for as long as the queue lives. Called where a consumer
//! leaves, never per message: the next insert allocates again.
//!
//! Must not know: what the collections hold.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Frees `map`'s table if it holds nothing (keeps its hasher).
pub(crate) fn shed_map<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if map.is_empty() {
        map.shrink_to_fit();
    }
}

/// Frees `deque`'s buffer if it holds nothing.
pub(crate) fn shed_deque<T>(deque: &mut VecDeque<T>) {
    if deque.is_empty() {
        deque.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_map_or_deque_holds_no_table_and_a_used_one_keeps_its_entries() {
        let mut map: foldhash::HashMap<u64, u64> = Default::default();
        let mut deque = VecDeque::new();
        for i in 0..100 {
            map.insert(i, i);
            deque.push_back(i);
        }
        shed_map(&mut map);
        shed_deque(&mut deque);
        assert_eq!((map.len(), deque.len()), (100, 100), "not empty: kept");
        map.clear();
        deque.clear();
        assert!(map.capacity() > 0 && deque.capacity() > 0);
        shed_map(&mut map);
        shed_deque(&mut deque);
        assert_eq!((map.capacity(), deque.capacity()), (0, 0));
        map.insert(1, 1);
        assert_eq!(map.get(&1), Some(&1), "usable again");
    }
}
